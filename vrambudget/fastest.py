"""`plan`: the fastest configuration that serves a wanted context (CUDA graphs + MTP, graphs, eager + MTP,
eager; each also with TRITON_ATTN where vLLM's pick allocates workspaces at the first request), the GMU each needs
on the first boot and after a restart, its verdict there, and what would help where nothing serves. Pure: no I/O."""

from __future__ import annotations

from dataclasses import dataclass

from .coefficients import Coefficients
from .deployment import Deployment
from .errors import UserError
from .budget import weight_bytes
from .prediction import answer as answer_for
from .prediction import min_gmu_for_context, predict

PLAN_ORDER = (("CUDA graphs + MTP", False, True), ("CUDA graphs", False, False), ("eager + MTP", True, True),
              ("eager", True, False))  # fastest first (the mission's measurements: graphs + MTP ~4x eager)


@dataclass
class PlanOption:
    label: str
    enforce_eager: bool
    mtp: bool
    gmu_restart: float | None  # smallest GMU at which `tokens` start on a warm boot
    gmu_first_boot: float | None  # ... on a cold first boot (same as restart in eager mode)
    max_serving_gmu: float | None  # highest GMU that still serves a prompt of `tokens`
    serves: bool  # some GMU both starts and serves
    attention_backend: str | None = None  # forced (--attention-backend); None: vLLM's pick
    verdict: str = ""  # serving a prompt of `tokens` at `gmu`: yes / at the edge / no
    max_num_seqs: int | None = None  # lowered from vLLM's default where its Mamba-block check refuses it (None: kept)

    @property
    def gmu(self) -> float | None:
        """The GMU to run: where the first boot starts too if that still serves, else the smallest
        that starts after a restart (the first boot then fails once); None if nothing serves."""
        if not self.serves:
            return None
        if self.gmu_first_boot and self.max_serving_gmu and self.gmu_first_boot <= self.max_serving_gmu:
            return self.gmu_first_boot
        return self.gmu_restart



def longest_prompt(max_model_len: int) -> int:
    """The longest prompt vLLM accepts at `max_model_len` (tokens): one shorter, so at least one token is generated
    (v1/engine/input_processor.py refuses a prompt as long as max_model_len)."""
    return max(1, max_model_len - 1)

def plan(d: Deployment, c: Coefficients, tokens: int, mtp_tokens: int = 2) -> list[PlanOption]:
    """For each configuration, fastest first: the smallest GMU at which `tokens` start (first boot and
    restart), whether a prompt of that length serves there, and the verdict at the GMU it would run. Where vLLM's
    attention backend allocates workspaces at the first request (FlashInfer), the same configuration with
    TRITON_ATTN follows it (no workspace; its decode speed is not measured here)."""
    w = weight_bytes(d)
    out = []
    for label, eager, mtp in PLAN_ORDER:
        if mtp and not d.model.arch.mtp_layers:
            continue
        dd = d.with_(enforce_eager=eager, spec_tokens=mtp_tokens if mtp else 0, speculative_method="mtp",
                     max_model_len=tokens, auto_fit=False, max_model_len_given=True)
        o = _option(label, dd, c, tokens, w)
        out.append(o)
        if o.verdict != "yes" and d.attention_backend is None and _has_workspace(dd, c, tokens, w):
            out.append(_option(f"{label}, TRITON_ATTN", dd.with_(attention_backend="TRITON_ATTN"), c, tokens, w))
    return out


def _has_workspace(d: Deployment, c: Coefficients, tokens: int, w) -> bool:
    p = predict(d.with_(compile_cache="warm"), c, w, prompt_tokens=longest_prompt(tokens))
    return any(t.stage == "first" and t.bytes for t in p.runtime.terms)


def _option(label: str, dd: Deployment, c: Coefficients, tokens: int, w) -> PlanOption:
    eager = dd.enforce_eager
    warm = dd if eager else dd.with_(compile_cache="warm")
    g_r = min_gmu_for_context(warm, c, tokens, w)
    g_f = g_r if eager else min_gmu_for_context(dd.with_(compile_cache="cold"), c, tokens, w)
    serve, answer = None, ""
    if g_r is not None:
        serve = predict(warm.with_(gmu=g_r), c, w, prompt_tokens=longest_prompt(tokens)).max_serving_gmu
    o = PlanOption(label, eager, dd.spec_tokens > 0, g_r, g_f, serve, bool(g_r and serve and serve >= g_r),
                   dd.attention_backend)
    if o.gmu is not None:
        a = answer_for(dd.with_(gmu=o.gmu), c, w, other=False, fix=not dd.max_num_seqs_given)
        if a.fixed is not None:  # vLLM's default max_num_seqs exceeds the Mamba cache blocks of CUDA graphs
            o.max_num_seqs = a.fixed.restart.deployment.max_num_seqs
            warm = warm.with_(max_num_seqs=o.max_num_seqs)
        p = predict(warm.with_(gmu=o.gmu), c, w, prompt_tokens=longest_prompt(tokens))
        answer = p.verdicts["prompt"].answer if p.verdicts and p.starts else "no"
    elif g_r is not None:
        answer = "no"
    o.verdict = answer
    return o


def best(options: list[PlanOption]) -> PlanOption | None:
    """The fastest option the model says serves: a 'yes' if one does, else the fastest at the edge."""
    return (next((o for o in options if o.serves and o.verdict == "yes"), None)
            or next((o for o in options if o.serves), None))


def what_would(d: Deployment, c: Coefficients, tokens: int) -> str:
    """Where nothing serves `tokens`: which checked change would (fp8 KV, a bigger catalog GPU, TP 2 on two of these
    cards), each with the GMU at which it starts eager; nothing is proposed that was not planned."""
    from .hardware.catalog import catalog

    ideas = []
    if d.kv_dtype_bytes > 1:
        g = min_gmu_for_context(d.with_(kv_cache_dtype="fp8", kv_dtype_bytes=1, enforce_eager=True), c, tokens)
        if g:
            ideas.append(f"--kv-cache-dtype fp8 (eager starts at GMU {g:.2f})")
    bigger = sorted((g for g in catalog().values() if g.total_bytes > d.gpu.total_bytes), key=lambda g: g.total_bytes)
    for g in bigger:
        gm = min_gmu_for_context(d.with_(gpu=g, enforce_eager=True), c, tokens)
        if gm:
            ideas.append(f"--gpu {g.key} (eager at GMU {gm:.2f})")
            break
    if d.tp == 1 and d.model.arch.num_attention_heads % 2 == 0:
        try:
            gt = min_gmu_for_context(d.with_(tp=2, enforce_eager=True), c, tokens)
        except UserError:  # the model does not split over two ranks
            gt = None
        if gt:
            ideas.append(f"--tensor-parallel-size 2 on two {d.gpu.name} (eager at GMU {gt:.2f})")
    if not ideas:
        return "No change vrambudget checked (fp8 KV cache, a bigger catalog GPU, two of these cards) serves it."
    return "Would (each checked): " + "; ".join(ideas) + "."
