"""`plan`: the fastest configuration that serves a wanted context (CUDA graphs + MTP, graphs, eager + MTP,
eager), the GMU each needs on the first boot and after a restart, and what would help where nothing serves.
Pure: no I/O."""

from __future__ import annotations

from dataclasses import dataclass

from .coefficients import Coefficients
from .deployment import Deployment
from .budget import weight_bytes
from .predict import min_gmu_for_context, predict

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

    @property
    def gmu(self) -> float | None:
        """The GMU to run: where the first boot starts too if that still serves, else the smallest
        that starts after a restart (the first boot then fails once); None if nothing serves."""
        if not self.serves:
            return None
        if self.gmu_first_boot and self.max_serving_gmu and self.gmu_first_boot <= self.max_serving_gmu:
            return self.gmu_first_boot
        return self.gmu_restart


def plan(d: Deployment, c: Coefficients, tokens: int, mtp_tokens: int = 2) -> list[PlanOption]:
    """For each configuration, fastest first: the smallest GMU at which `tokens` start (first boot and
    restart) and whether a prompt of that length serves there."""
    w = weight_bytes(d)
    out = []
    for label, eager, mtp in PLAN_ORDER:
        if mtp and not d.model.arch.mtp_layers:
            continue
        dd = d.with_(enforce_eager=eager, spec_tokens=mtp_tokens if mtp else 0, speculative_method="mtp",
                     max_model_len=tokens, auto_fit=False, max_model_len_given=True)
        warm = dd if eager else dd.with_(compile_cache="warm")
        g_r = min_gmu_for_context(warm, c, tokens, w)
        g_f = g_r if eager else min_gmu_for_context(dd.with_(compile_cache="cold"), c, tokens, w)
        serve = None
        if g_r is not None:
            serve = predict(warm.with_(gmu=g_r), c, w, prompt_tokens=tokens).max_serving_gmu
        out.append(PlanOption(label, eager, mtp, g_r, g_f, serve, bool(g_r and serve and serve >= g_r)))
    return out


def what_would(d: Deployment, c: Coefficients, tokens: int) -> str:
    """Where nothing serves `tokens`: which change would (fp8 KV, another catalog GPU, a 4-bit checkpoint, TP 2)."""
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
    if d.model.arch.quantization is None:
        ideas.append("a 4-bit checkpoint (AWQ/GPTQ/NVFP4: point --model at it)")
    if d.tp == 1:
        ideas.append("--tensor-parallel-size 2 on two cards")
    return "Would: " + "; ".join(ideas) + "."
