"""Start-up facts per GPU (profiles/gpu_facts.json): the CUDA context held before vLLM's first
snapshot, and the attention backend vLLM picks there with the memory it adds. Pure lookups over
bundled data; every answer carries its source and whether it was measured."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from .catalog import GPU
from ..profiles import bundled_dir, read_json
from ..model.weights import Int4Load


@dataclass(frozen=True)
class Fact:
    """A number (bytes) with where it comes from; `measured` False means an estimate, whose truth lies within
    value + low .. value + high as far as the evidence shows (bytes; 0, 0 where measured)."""

    value: int
    source: str
    measured: bool
    low: int = 0
    high: int = 0


@dataclass(frozen=True)
class Backend:
    name: str  # vLLM's AttentionBackendEnum name
    variant: str  # e.g. FA2 / FA3
    profiled_bytes: int  # what it adds to the profiled torch peak (workspaces)
    source: str
    cost_source: str
    runtime_eager_bytes: int = 0  # allocated lazily at the first request (eager, or graphs with attention outside
    runtime_graphs_bytes: int = 0  # them: PIECEWISE), per attention metadata builder, outside the budget
    runtime_source: str = ""
    cudagraph_support: str = "ALWAYS"  # vLLM's AttentionCGSupport for this backend on this GPU

    def runtime_bytes(self, eager: bool) -> int:
        return self.runtime_eager_bytes if eager else self.runtime_graphs_bytes

    @property
    def label(self) -> str:
        return f"{self.name} ({self.variant})" if self.variant else self.name


@lru_cache(maxsize=1)
def _facts() -> dict[str, Any]:
    return read_json(bundled_dir() / "gpu_facts.json")


def cuda_context(gpu: GPU) -> Fact:
    """Memory held before vLLM's first snapshot (bytes): measured for the card, else the SM-count
    model (an estimate), else the H200 figure for an unknown card (an estimate)."""
    c = _facts()["cuda_context"]
    m = c["measured"].get(gpu.key)
    if m:
        return Fact(int(m["bytes"]), m["source"], True)
    model = c["model"]
    spread = model.get("spread", {})
    low, high = int(spread.get("low_bytes", 0)), int(spread.get("high_bytes", 0))
    if gpu.sms:
        value = int(model["base_bytes"] + model["per_sm_bytes"] * gpu.sms)
        source = f"estimate: SM-count model ({gpu.sms} SMs; {model['source'].removeprefix('estimate: ')})"
        bound = c.get("bounds", {}).get(gpu.key)
        if bound and int(bound["max_bytes"]) < value:  # public evidence caps it below the model: take the cap
            value, source = int(bound["max_bytes"]), f"estimate: at most this ({bound['source']})"
        if bound:  # the spread cannot reach above the evidence
            high = min(high, int(bound["max_bytes"]) - value)
        return Fact(value, source, False, low, high)
    h200 = c["measured"]["h200"]
    return Fact(int(h200["bytes"]), "estimate: SM count unknown, the H200 figure is used", False, -int(h200["bytes"]) // 2,
                0)


def attention_backend(gpu: GPU, kv: str, head_dim: int = 128) -> Backend:
    """The attention backend vLLM picks on this GPU for this KV dtype class (deployment.kv_backend_class:
    bf16, fp8, fp8_e5m2, per_token_head) and the model's largest attention head dim."""
    a = _facts()["attention_backends"]
    for r in a["rules"]:
        if head_dim < r.get("min_head_dim", 0):
            continue
        kinds = r["kv"] if isinstance(r["kv"], list) else [r["kv"]]
        if gpu.architecture in r["architectures"] and ("any" in kinds or kv in kinds):
            return _backend(r["backend"], r.get("variant", ""), r["source"], gpu)
    return _backend("FLASH_ATTN", "", f"architecture {gpu.architecture!r} not in the table: assumed FLASH_ATTN", gpu)


def backend_named(name: str, gpu: GPU | None = None) -> Backend:
    """A backend forced by the user (vLLM's --attention-backend NAME)."""
    return _backend(name.upper(), "", "forced with --attention-backend", gpu)


def kv_readers(kv_class: str) -> tuple[tuple[str, ...] | None, str]:
    """The backends that read this KV dtype class (deployment.kv_backend_class), None for every one, and the source."""
    r = _facts()["attention_backends"].get("kv_readers", {}).get(kv_class)
    return (tuple(r["backends"]), r["source"]) if r else (None, "")


def known_backends() -> tuple[str, ...]:
    """The backends whose costs the data carries (what --attention-backend accepts)."""
    return tuple(_facts()["attention_backends"]["costs"])


def _backend(name: str, variant: str, source: str, gpu: GPU | None = None) -> Backend:
    costs = _facts()["attention_backends"]["costs"]
    cost = costs.get(name) or costs["FLASH_ATTN"]
    cg = cost.get("cudagraph_support", {})
    support = cg.get(gpu.architecture, cg.get("default", "ALWAYS")) if gpu else cg.get("default", "ALWAYS")
    return Backend(name, variant, int(cost["profiled_bytes"]), source, cost["source"],
                   int(cost.get("runtime_bytes_eager", 0)), int(cost.get("runtime_bytes_graphs", 0)),
                   cost.get("runtime_source", ""), support)


def flashinfer_autotunes(gpu: GPU) -> Fact:
    """Whether vLLM runs FlashInfer's autotune (a full-size dummy forward) after the KV cache is allocated on this
    GPU (gpu_facts.json post_startup); `value` 1 or 0, with its source. Unknown architectures: assumed not."""
    for r in _facts()["post_startup"]["rules"]:
        if gpu.architecture in r["architectures"]:
            return Fact(int(bool(r["flashinfer_autotune"])), r["source"], False)
    return Fact(0, f"architecture {gpu.architecture!r} not in gpu_facts.json post_startup: assumed no autotune",
                False)


def gdn_prefill_path(gpu: GPU) -> str:
    """The GDN chunked-prefill kernel vLLM 0.20.2 uses: FlashInfer's on compute capability 9.0 (it is
    JIT-compiled on first use), the Triton/FLA kernels elsewhere (model_executor/layers/mamba/
    gdn_linear_attn.py ChunkGatedDeltaRule; `--gdn-prefill-backend triton` forces FLA)."""
    return "FlashInfer GDN (Hopper)" if gpu.architecture == "hopper" else "Triton/FLA"


def int4_load(gpu: GPU, extra_bytes_per_group: float = 0.0, kernel: str | None = None) -> Int4Load:
    """What the 4-bit kernel vLLM runs on this GPU (or `kernel`, where a log names it) keeps of a checkpoint's
    zero points and g_idx at load (gpu_facts.json mixed_precision_kernels); `extra_bytes_per_group` is the vLLM
    version's (vllm_rules)."""
    for r in _facts()["mixed_precision_kernels"]["rules"]:
        if r["kernel"] == kernel if kernel else gpu.architecture in r["architectures"]:
            return Int4Load(float(r["zero_point_bytes"]) or None, bool(r["unused_zero_points_kept"]),
                            bool(r["g_idx_kept"]), extra_bytes_per_group)
    return Int4Load(extra_bytes_per_group=extra_bytes_per_group)

