"""Start-up facts per GPU (profiles/gpu_facts.json): the CUDA context held before vLLM's first
snapshot, and the attention backend vLLM picks there with the memory it adds. Pure lookups over
bundled data; every answer carries its source and whether it was measured."""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

from .catalog import GPU, Basis, architecture_of
from ..errors import UserError
from ..profiles import bundled_dir, read_json
from ..units import GiB, MiB


@dataclass(frozen=True)
class Fact:
    """A number (bytes) with where it comes from; `measured` False means an estimate, whose truth lies within
    value + low .. value + high as far as the evidence shows (bytes; 0, 0 where measured)."""

    value: int
    source: str
    measured: bool
    low: int = 0
    high: int = 0
    kind: str = ""  # how an estimate was made, in words (cuda_context: the model, a public bound, a fallback)


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


@dataclass(frozen=True)
class ContextModel:
    """The CUDA context model of gpu_facts.json (bytes): base per architecture family + local memory."""

    stack_bytes: int
    max_threads: dict[str, int]  # compute capability -> max resident threads per SM
    families: dict[str, str]  # architecture -> family
    bases: dict[str, int]  # family -> bytes besides local memory (mean over the observations of cards alone)
    base_sources: dict[str, str]
    low: int  # truth - model over every observation not known to share its card (bytes)
    high: int
    measured: dict[str, Fact]  # catalog key -> the lab's own reading (observations whose source says 'measured')
    seen_alone: dict[str, tuple[int, ...]]  # catalog key -> public observations of the card alone (bytes)
    card_low: int  # one card's observations (alone or not known to share it) - its own reference, + rounding
    card_high: int  # (bytes; the reference: the lab's measurement, else the mean of the observations alone)


def local_memory(sms: int, max_threads_per_sm: int, stack_bytes: int) -> int:
    """Local memory CUDA reserves at context creation (bytes): one stack per thread that can be resident at once."""
    return sms * max_threads_per_sm * stack_bytes


@lru_cache(maxsize=1)
def context_model() -> ContextModel:
    c = _facts()["cuda_context"]
    m = c["model"]
    stack, families = int(m["stack_bytes"]), m["families"]
    threads = {k: int(v) for k, v in m["max_threads_per_sm"].items()}
    fam_of = {cc: families.get(architecture_of(cc), "") for cc in threads}
    obs = [(o, fam_of[o["cc"]], int(o["used_bytes"]) - local_memory(int(o["sms"]), threads[o["cc"]], stack))
           for o in c["observations"]]  # (observation, family, what it holds besides local memory)
    rest: dict[str, list[tuple[int, str]]] = {}
    for o, family, beside in obs:
        if o["alone"]:
            rest.setdefault(family, []).append((beside, o["gpu"]))
    bases = {f: round(sum(b for b, _ in v) / len(v)) for f, v in rest.items()}
    sources = {f: ", ".join(sorted({g for _, g in v})) for f, v in rest.items()}
    resid = [beside - bases[family] for o, family, beside in obs if o["alone"] is not False]
    rounding = GiB // 100  # vLLM prints free and total memory to 0.01 GiB
    measured = {o["gpu"]: Fact(int(o["used_bytes"]), o["source"], True) for o, _, _ in obs
                if o["source"].startswith("measured")}
    seen: dict[str, list[int]] = {}
    for o, _, _ in obs:
        if o["alone"] and o["gpu"] not in measured:
            seen.setdefault(o["gpu"], []).append(int(o["used_bytes"]))
    ref = {k: sum(v) / len(v) for k, v in seen.items()} | {k: f.value for k, f in measured.items()}
    dev = [int(o["used_bytes"]) - ref[o["gpu"]] for o, _, _ in obs if o["alone"] is not False and o["gpu"] in ref]
    return ContextModel(stack, threads, families, bases, sources, min(resid) - rounding, max(resid) + rounding,
                        measured, {k: tuple(v) for k, v in seen.items()}, round(min(dev)) - rounding,
                        round(max(dev)) + rounding)


def cuda_context(gpu: GPU) -> Fact:
    """Memory held before vLLM's first snapshot (bytes): measured for the card; else what public observations of
    the card alone show (their mean: an estimate for the user's driver); else the context model (an estimate:
    base of the architecture's family + SMs x threads per SM x stack). An estimate is capped by the card's public
    bound, and its spread reaches neither above that bound nor below the card's local memory (reserved whatever
    else the context holds). An unknown card or architecture gets the H200 figure (an estimate)."""
    c = _facts()["cuda_context"]
    cm = context_model()
    if gpu.key in cm.measured:
        return cm.measured[gpu.key]
    threads = cm.max_threads.get(gpu.compute_capability)
    family = cm.families.get(gpu.architecture)
    local = local_memory(gpu.sms, threads, cm.stack_bytes) if gpu.sms and threads else 0
    if gpu.key in cm.seen_alone:
        fact = _observed(gpu, c, cm)
    elif local and family in cm.bases:
        how = {True: "alone", False: "with other use", None: "other use unknown"}
        seen = [f"{int(o['used_bytes']) / GiB:.2f} GiB ({how[o['alone']]})" for o in c["observations"]
                if o["gpu"] == gpu.key]
        seen_text = "; this card seen: " + ", ".join(seen) if seen else ""
        source = (f"estimate: {cm.bases[family] / GiB:.2f} GiB base of the {family} generation (observed: "
                  f"{cm.base_sources[family]}) + {gpu.sms} SMs x {threads} threads x {cm.stack_bytes} B of stack "
                  f"= {local / GiB:.2f} GiB local memory (measured per thread on the lab H100){seen_text}")
        fact = Fact(cm.bases[family] + local, source, False, cm.low, cm.high, "generation base + local memory")
    else:
        h200 = cm.measured["h200"].value
        return Fact(h200, "estimate: SM count or architecture unknown, the H200 figure is used", False, -h200 // 2,
                    0, "H200 figure")
    bound = c.get("bounds", {}).get(gpu.key)
    if bound and int(bound["max_bytes"]) < fact.value:  # public evidence caps it below the estimate: take the cap
        fact = replace(fact, value=int(bound["max_bytes"]), source=f"estimate: at most this ({bound['source']})",
                       kind="a public bound")
    high = min(fact.high, int(bound["max_bytes"]) - fact.value) if bound else fact.high
    return replace(fact, low=max(fact.low, local - fact.value), high=high)


def _observed(gpu: GPU, c: dict[str, Any], cm: ContextModel) -> Fact:
    """The context of a card seen alone in public (bytes): the mean of its observations; the spread is what one
    card's observations showed around its own figure (the lab's H100 against two public H100s on other drivers)."""
    seen = cm.seen_alone[gpu.key]
    refs = [o["source"].removeprefix("public: ").split(" (")[0] for o in c["observations"]
            if o["gpu"] == gpu.key and o["alone"]]
    source = (f"estimate: observed on this card alone in public, {len(seen)} time{'s' * (len(seen) > 1)}: "
              + ", ".join(f"{u / GiB:.2f} GiB" for u in seen) + " (gpu_facts.json cuda_context.observations: "
              + "; ".join(refs) + "); not measured on the user's driver")
    return Fact(round(sum(seen) / len(seen)), source, False, cm.card_low, cm.card_high,
                "observed on this card in public")


def attention_backend(gpu: GPU, kv: str, head_dim: int = 128, version: str | None = None) -> Backend:
    """The attention backend vLLM picks on this GPU for this KV dtype class (deployment.kv_backend_class:
    bf16, fp8, fp8_e5m2, per_token_head), the model's largest attention head dim and the vLLM version (a rule's
    vllm_from / vllm_below)."""
    from ..vllm_rules import _key

    a = _facts()["attention_backends"]
    for r in a["rules"]:
        if head_dim < r.get("min_head_dim", 0):
            continue
        if version and (("vllm_from" in r and _key(version) < _key(r["vllm_from"]))
                        or ("vllm_below" in r and _key(version) >= _key(r["vllm_below"]))):
            continue
        kinds = r["kv"] if isinstance(r["kv"], list) else [r["kv"]]
        if gpu.architecture in r["architectures"] and ("any" in kinds or kv in kinds):
            return _backend(r["backend"], r.get("variant", ""), r["source"], gpu)
    return _backend("FLASH_ATTN", "", f"architecture {gpu.architecture!r} not in the table: assumed FLASH_ATTN", gpu)


def mla_backend(gpu: GPU, kv: str, sparse: bool = False) -> tuple[Backend, int]:
    """The MLA backend vLLM picks on this GPU for this KV dtype class, and its block size (gpu_facts.json
    mla_backends, sparse_mla_backends); an architecture not in the table gets TRITON_MLA (any GPU), said in its
    source; sparse MLA on one not in its table is refused."""
    for r in _facts()["sparse_mla_backends" if sparse else "mla_backends"]["rules"]:
        if gpu.architecture in r["architectures"] and r["kv"] in ("any", kv):
            return _backend(r["backend"], "", r["source"], gpu), int(r["block_size"])
    if sparse:
        raise UserError(f"sparse MLA (DeepSeek V3.2 / GLM-5) on {gpu.name} ({gpu.architecture}): vLLM's sparse MLA "
                        "backends are modelled on Hopper only (measured on an H200)")
    return _backend("TRITON_MLA", "", f"architecture {gpu.architecture!r} not in mla_backends: TRITON_MLA assumed",
                    gpu), 16


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


def gdn_prefill_path(gpu: GPU, forced: str | None = None) -> str:
    """The GDN chunked-prefill kernel vLLM 0.20.2+ uses: FlashInfer's on compute capability 9.0 (it is
    JIT-compiled on first use), the Triton/FLA kernels elsewhere (model_executor/layers/mamba/
    gdn_linear_attn.py ChunkGatedDeltaRule); `--gdn-prefill-backend` (`forced`) picks one."""
    if forced == "triton" or (forced is None and gpu.architecture != "hopper"):
        return "Triton/FLA"
    return "FlashInfer GDN (Hopper)"


@dataclass(frozen=True)
class Int4Load:
    """What a GPU's 4-bit kernel and the vLLM version do at load to what sits beside the packed weights.
    used_zero_point_bytes: bytes per (group, output) of zero points the kernel uses (None: as packed);
    unused_zero_points_kept / g_idx_kept: a symmetric GPTQ checkpoint's qzeros and its g_idx (no act order) stay
    allocated; extra_bytes_per_group: what the version loads beyond that (vllm_rules)."""

    used_zero_point_bytes: float | None = None
    unused_zero_points_kept: bool = True
    g_idx_kept: bool = True
    extra_bytes_per_group: float = 0.0

    def zero_point_bytes(self, symmetric: bool, bits: int) -> float:
        """Bytes per (group, output) a checkpoint's stored zero points hold once loaded."""
        if symmetric:
            return bits / 8 if self.unused_zero_points_kept else 0.0
        return self.used_zero_point_bytes or bits / 8

    def keeps_g_idx(self, act_order: bool) -> bool:
        """Whether a GPTQ layer's g_idx (4 bytes per input) stays allocated."""
        return act_order or self.g_idx_kept



def int4_load(gpu: GPU, extra_bytes_per_group: float = 0.0, kernel: str | None = None) -> Int4Load:
    """What the 4-bit kernel vLLM runs on this GPU (or `kernel`, where a log names it) keeps of a checkpoint's
    zero points and g_idx at load (gpu_facts.json mixed_precision_kernels); `extra_bytes_per_group` is the vLLM
    version's (vllm_rules)."""
    for r in _facts()["mixed_precision_kernels"]["rules"]:
        if r["kernel"] == kernel if kernel else gpu.architecture in r["architectures"]:
            return Int4Load(float(r["zero_point_bytes"]) or None, bool(r["unused_zero_points_kept"]),
                            bool(r["g_idx_kept"]), extra_bytes_per_group)
    return Int4Load(extra_bytes_per_group=extra_bytes_per_group)


def under_wsl(gpu: GPU) -> GPU:
    """The card as CUDA reports it under WSL 2: its whole memory (the catalog's memory_mib) as the total
    (gpu_facts.json wsl_total). A card without memory_mib keeps its total, and its source says so."""
    rule = _facts()["wsl_total"]
    if gpu.memory_mib is None:
        return replace(gpu, source=f"{gpu.source}; under WSL 2 CUDA reports the whole memory, not in the catalog "
                                   f"for this card, so the native total stands (an estimate)")
    return replace(gpu, total_bytes=gpu.memory_mib * MiB, basis=Basis.ESTIMATED,
                   source=f"estimate: under WSL 2 CUDA reports the whole {gpu.memory_mib:,} MiB "
                          f"(gpu_facts.json wsl_total, {len(rule['evidence'])} public observations)")


def unified_memory_host_share() -> Fact:
    """What the host's processes add to vLLM's non-torch memory on a unified-memory GPU during the profile
    (gpu_facts.json unified_memory): not predicted; `low`/`high` the public boots' shortfall, in bytes."""
    u = _facts()["unified_memory"]
    low, high = (int(x * GiB) for x in u["observed_gib"])
    return Fact(0, f"{u['rule']} Observed: {u['observed_source']}", False, low=low, high=high)


def unified_memory_band() -> str:
    """What public boots lost to the host's share, as every output says it: 'LOW-HIGH GiB'."""
    h = unified_memory_host_share()
    return f"{h.low / GiB:.2f}-{h.high / GiB:.2f} GiB"
