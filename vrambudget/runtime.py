"""After startup: what serving needs beyond what vLLM holds once it has started, against the memory free then, and
the verdicts with the band measured around them. Pure arithmetic; bytes per rank, lengths in tokens.

What vLLM holds when the first request arrives is not its budget `ceil(total x GMU)` (vLLM 0.20.2 source,
v1/worker/gpu_worker.py compile_or_warm_up_model):
- CUDA graphs: capture_model empties the allocator's cache before and after capturing, so the profiled activation
  peak is released; then the sampler's warmup over max_num_seqs rows is kept on purpose, and startup keeps a little
  more (kernels loaded, the context grown after profiling, allocator rounding): 0.16-0.19 GiB on four H100 startups.
- eager, where vLLM autotunes FlashInfer (compute capability >= 9.0): a full-size dummy forward runs after the KV
  cache is allocated and nothing empties the cache after it: the lab held 0.11-0.25 GiB beyond the budget.
- eager elsewhere (Ampere, Ada): nothing re-runs the forward, so the peak stays released as with graphs (source).
What a request then needs:
- the attention backend's lazily allocated buffers at the first request (FlashInfer: 394 MiB per attention metadata
  builder), in eager mode and where CUDA graphs resolve to PIECEWISE;
- for a long prompt: a prefill chunk's forward where the peak was released; the GDN chunked-prefill live set (one
  layer, `chunk_gated_delta_rule_fwd`'s tensors for T = max_num_batched_tokens tokens: v, w, u, v_new, o, A, h, q,
  k, g, beta; exact sizes from vLLM 0.20.2's fla/ops, cross-checked on club-3090's OOM lines); the MTP drafter's
  chunk buffers; the allocator's growth with the prompt.
Each term carries the spread its measurements showed (truth - model, bytes); a verdict adds them up into its band.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from .model.arch import ModelArch
from .units import GiB, cdiv

FLA_CHUNK = 64  # vLLM fla/ops/utils.py FLA_CHUNK_SIZE


@dataclass(frozen=True)
class Term:
    """One amount (bytes): needed beyond what vLLM holds, or (a `held` term) what startup holds beyond its budget,
    negative where it releases. `low`/`high`: truth - model as measured (bytes); `unknown`: what that spread stands
    for, in words, for the verdict that it decides."""

    name: str
    bytes: int
    source: str
    measured: bool
    low: int = 0
    high: int = 0
    unknown: str = ""
    stage: str = "prompt"  # "first": arrives with the first request; "prompt": with a long prompt


@dataclass(frozen=True)
class Verdict:
    """yes / at the edge / no for one question, with the margin (bytes: > 0 is spare) and its band, and the unknown
    that decides it when at the edge."""

    question: str
    answer: str  # "yes" | "at the edge" | "no"
    margin_bytes: int
    low_bytes: int  # the margin's band: margin + low .. margin + high
    high_bytes: int
    deciding: str = ""

    def to_json(self) -> dict:
        return {"question": self.question, "answer": self.answer, "margin_bytes": self.margin_bytes,
                "band_bytes": [self.margin_bytes + self.low_bytes, self.margin_bytes + self.high_bytes],
                "deciding": self.deciding or None}

    @property
    def text(self) -> str:
        lo, hi = (self.margin_bytes + self.low_bytes) / GiB, (self.margin_bytes + self.high_bytes) / GiB
        band = f"{self.margin_bytes / GiB:+.2f} GiB (band {lo:+.2f} to {hi:+.2f})"
        return f"{self.question}: {self.answer.upper()}, margin {band}" + (f"; {self.deciding}" if self.deciding else "")


def verdict(question: str, margin: int, spreads: list[Term], context: Term | None = None) -> Verdict:
    """The margin (bytes, > 0: spare) and the terms whose measured spread moves it (a need's error lowers the margin,
    the CUDA context's error lowers the free memory). `context.low/high` are the context's truth - estimate."""
    parts = [(t, -t.high, -t.low) for t in spreads if t.low or t.high]
    if context is not None and (context.low or context.high):
        parts.append((context, -context.high, -context.low))
    lo, hi = sum(p[1] for p in parts), sum(p[2] for p in parts)
    answer = "yes" if margin + lo >= 0 else "no" if margin + hi < 0 else "at the edge"
    deciding = ""
    if answer == "at the edge" and parts:
        # the widest spread decides; a context would have to be below zero to rescue it: the next one decides
        ranked = sorted(parts, key=lambda p: p[2] - p[1], reverse=True)
        t, a, b = next((x for x in ranked if x[0] is not context or x[0].bytes + margin > 0), ranked[0])
        if t is context:
            deciding = (f"{'holds' if margin >= 0 else 'fails'} by the model; it holds only if this card's CUDA "
                        f"context is under {(t.bytes + margin) / GiB:.2f} GiB (estimated {t.bytes / GiB:.2f}; "
                        f"the evidence allows {(t.bytes + t.low) / GiB:.2f} to {(t.bytes + t.high) / GiB:.2f})")
        else:
            deciding = (f"{'holds' if margin >= 0 else 'fails'} by the model; decided by {t.unknown or t.name} "
                        f"(spread {a / GiB:+.2f} to {b / GiB:+.2f} GiB)")
    return Verdict(question, answer, margin, lo, hi, deciding)


def gdn_prefill_live_bytes(a: ModelArch, tokens: int, tp: int = 1) -> int:
    """Live tensors of one GDN layer's chunked prefill of `tokens` tokens (bytes per rank)."""
    g = a.gdn
    if g is None:
        return 0
    h = max(1, g.num_value_heads // tp)
    hk = max(1, g.num_key_heads // tp)
    k, v = g.key_head_dim, g.value_head_dim
    bf16, fp32 = 2, 4
    per_value = 5 * tokens * h * v * bf16  # v, w (K wide; K == V here), u, v_new, o
    if k != v:
        per_value = 4 * tokens * h * v * bf16 + tokens * h * k * bf16
    a_mat = tokens * h * FLA_CHUNK * bf16
    h_state = cdiv(tokens, FLA_CHUNK) * h * k * v * bf16
    qk = 2 * tokens * hk * k * bf16
    gates = 2 * tokens * h * fp32
    return per_value + a_mat + h_state + qk + gates


def mtp_prefill_bytes(a: ModelArch, tokens: int, mtp: bool) -> int:
    """The MTP drafter's chunk buffers: its fc input (2h) and output (h) in bf16 (bytes)."""
    return 3 * tokens * a.hidden_size * 2 if mtp else 0


@dataclass(frozen=True)
class RuntimeNeed:
    """`held`: what vLLM holds after startup beyond its budget (negative: released); `terms`: what serving needs
    beyond that; `margin_bytes`: free at start - budget. `need_bytes` = held + needs, so serving fits where
    margin >= need."""

    terms: tuple[Term, ...]
    margin_bytes: int
    prompt_tokens: int
    held: tuple[Term, ...] = ()
    context: Term | None = None  # the CUDA context, with its spread where it is an estimate
    max_model_len: int = 0  # the length the server started with (0: not known); vLLM rejects a prompt not below it

    @property
    def prompt_too_long(self) -> bool:
        """vLLM refuses a decoder prompt as long as max_model_len or longer (v1/engine/input_processor.py)."""
        return 0 < self.max_model_len <= self.prompt_tokens

    def need_for(self, stage: str = "prompt") -> int:
        wanted = ("first",) if stage == "first" else ("first", "prompt")
        return sum(t.bytes for t in self.held) + sum(t.bytes for t in self.terms if t.stage in wanted)

    @property
    def need_bytes(self) -> int:
        return self.need_for("prompt")

    @property
    def serves(self) -> bool:
        return self.margin_bytes >= self.need_bytes and not self.prompt_too_long

    @property
    def measured(self) -> bool:
        return all(t.measured for t in self.terms + self.held)

    def verdict(self, stage: str = "prompt") -> Verdict:
        wanted = ("first",) if stage == "first" else ("first", "prompt")
        question = ("serves the first request" if stage == "first" else
                    f"serves a prompt of {self.prompt_tokens:,} tokens")
        spreads = list(self.held) + [t for t in self.terms if t.stage in wanted]
        if stage != "first" and self.prompt_too_long:
            return Verdict(question, "no", self.margin_bytes - self.need_for(stage), 0, 0,
                           f"vLLM rejects it: a prompt must be shorter than max_model_len {self.max_model_len:,}")
        return verdict(question, self.margin_bytes - self.need_for(stage), spreads, self.context)


@dataclass(frozen=True)
class Coef:
    """A measured amount (bytes) with the lowest and highest its measurements showed, and their source."""

    value: float
    low: float
    high: float
    source: str


@dataclass
class RuntimeInputs:
    """What the runtime terms depend on (bytes per rank unless named)."""

    arch: ModelArch
    tokens: int  # one prefill chunk: the prompt, at most max_num_batched_tokens
    tp: int
    mtp: bool
    eager: bool
    autotune: bool  # vLLM runs FlashInfer's full-size autotune forward after the KV cache (compute capability >= 9)
    activation: int  # the profiled peak (the budget's term)
    chunk_forward: int  # one prefill chunk's forward above the base, as profiled (released peaks come back for it)
    sampler_warmup: int  # the sampler's warmup after capture: max_num_seqs rows (and a drafter's), kept reserved
    gdn_path: str
    prompt_tokens: int
    margin: int  # free at start - budget
    backend: tuple[str, int, str, int, int] | None = None  # (label, bytes at the first request, source, low, high)
    growth: Coef = field(default_factory=lambda: Coef(0.0, 0.0, 0.0, ""))
    held_graphs: Coef = field(default_factory=lambda: Coef(0.0, 0.0, 0.0, ""))
    held_eager_autotune: Coef = field(default_factory=lambda: Coef(0.0, 0.0, 0.0, ""))
    prompt_error: Coef = field(default_factory=lambda: Coef(0.0, 0.0, 0.0, ""))  # truth - model of a long prompt
    activation_error: Coef = field(default_factory=lambda: Coef(0.0, 0.0, 0.0, ""))  # truth - model of the peak
    graphs_outside: Coef = field(default_factory=lambda: Coef(0.0, 0.0, 0.0, ""))  # graphs captured after the KV
    # cache that the version leaves out of its budget (Model Runner V2 before 0.29, V1 before 0.20), bytes


def runtime_need(i: RuntimeInputs, context: Term | None = None) -> RuntimeNeed:
    """What a prompt of `prompt_tokens` needs beyond what vLLM holds after startup, term by term."""
    released = not i.eager or not i.autotune  # the profiled peak is given back before serving
    held: list[Term] = []
    if released:
        a = i.activation_error  # a larger true peak releases more: as a need, the opposite sign
        held.append(Term("profiled peak released after startup", -i.activation,
                         "vLLM 0.20.2 source: the allocator's cache is emptied around CUDA graph capture; in eager "
                         "mode nothing re-reserves it without the FlashInfer autotune", False, -int(a.high), -int(a.low),
                         "the activation peak as profiled"))
        held.append(Term("sampler warmup kept after startup", i.sampler_warmup, "vLLM 0.20.2 gpu_worker.py: the "
                         "sampler's dummy run over max_num_seqs rows comes after capture_model on purpose, so that "
                         "its buffers stay reserved; the profile's sampler term at that batch", False))
        h = i.held_graphs
        held.append(Term("kept by startup beyond the budget", int(h.value), h.source, True, int(h.low - h.value),
                         int(h.high - h.value), "what vLLM keeps after startup on this card" +
                         ("" if not i.eager else " in eager mode (measured with graphs only)")))
        g = i.graphs_outside
        if g.value:
            held.append(Term("CUDA graphs captured outside the budget", int(g.value), g.source, False,
                             int(g.low - g.value), int(g.high - g.value), "the CUDA graphs' memory"))
    else:
        h = i.held_eager_autotune
        held.append(Term("kept by startup beyond the budget (eager, FlashInfer autotune)", int(h.value), h.source,
                         True, int(h.low - h.value), int(h.high - h.value), "what the eager autotune keeps reserved"))
    terms: list[Term] = []
    if i.backend and i.backend[1]:
        terms.append(Term(f"{i.backend[0]}: workspace (first request)", i.backend[1], i.backend[2], True,
                          i.backend[3], i.backend[4], "the attention backend's first-request buffers", "first"))
    if released:
        terms.append(Term("a prefill chunk's forward (its peak was released)", i.chunk_forward,
                          f"the profiled forward over {i.tokens:,} batched tokens, allocated again by a long prompt",
                          False))
    if i.arch.gdn is not None:
        live = gdn_prefill_live_bytes(i.arch, i.tokens, i.tp)
        terms.append(Term("GDN prefill live tensors", live, f"GDN chunked prefill live set, one layer, {i.tokens} "
                          f"tokens a chunk ({i.gdn_path}; vLLM 0.20.2 fla/ops allocation sizes)", False))
    if i.mtp:
        terms.append(Term("MTP drafter chunk buffers", mtp_prefill_bytes(i.arch, i.tokens, i.mtp),
                          "drafter fc input (2h) + output (h) per chunk token, bf16", False))
    e = i.prompt_error
    terms.append(Term("allocator growth with the prompt", int(i.growth.value * i.prompt_tokens), i.growth.source, True,
                      int(e.low), int(e.high), "what a long prompt allocates" if e.source else ""))
    return RuntimeNeed(tuple(terms), i.margin, i.prompt_tokens, tuple(held), context)


def eager_warmup_bytes(mlp_width: int, tokens: int, tp: int = 1) -> int:
    """Eager mode where vLLM autotunes FlashInfer (compute capability >= 9.0): after the KV cache is allocated, the
    autotune re-runs a dummy forward of `tokens` tokens; it must find two MLP intermediates (tokens x width/tp, bf16)
    outside the budget (bytes). An estimate bounded by four H100 lab startups (vLLM 0.20.2): Qwen3.5-9B, 8192 tokens
    (192 MiB each): 143 MiB failed ("Tried to allocate 192.00 MiB"), 389 MiB started; Qwen3.5-4B, 2048 tokens
    (36 MiB each): 16 and 64 MiB failed, 300 MiB started."""
    return 2 * tokens * max(1, mlp_width // tp) * 2


def max_serving_gmu(total_bytes: int, free_at_start: int, need_bytes: int) -> float | None:
    """Largest GMU (0.01 steps) whose budget leaves `need_bytes` of the free memory unbudgeted."""
    g = min(1.0, math.floor((free_at_start - need_bytes) / total_bytes * 100 + 1e-9) / 100)
    while g > 0 and free_at_start - math.ceil(total_bytes * g) < need_bytes:
        g = round(g - 0.01, 2)
    return g if g > 0 else None
