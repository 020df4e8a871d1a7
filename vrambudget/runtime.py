"""After startup: what serving a prompt needs outside vLLM's budget, and the highest GMU that still
serves it. Pure arithmetic; bytes per rank, lengths in tokens.

vLLM fills its budget `ceil(total x GMU)` with weights, the profiled peak and the KV cache. What a
real prefill allocates beyond that must fit in the memory left outside the budget,
`free at start - budget`. The terms:

- GDN chunked prefill (Qwen3.5 / Qwen3-Next hybrids on the Triton/FLA path, i.e. every non-Hopper
  GPU): `chunk_gated_delta_rule_fwd` holds, for one layer and one chunk of T = max_num_batched_tokens
  tokens, v, w, u, v_new and o (T x H x V, bf16), A (T x H x 64, bf16), h (ceil(T/64) x H x K x V,
  bf16), q and k (T x Hk x K, bf16), g and beta (T x H, fp32); H, Hk = value / key heads per rank.
  Sizes from vLLM 0.20.2's fla/ops (chunk.py, chunk_delta_h.py, chunk_o.py, FLA_CHUNK_SIZE = 64):
  exact allocations, not fitted. Cross-checks: club-3090's Qwen3.6-27B cliff OOMs at
  `chunk_o.py empty_like(v)` asking for 50 MiB (T = 4128, H = 48: 48.4 MiB rounded to the
  allocator's 2 MiB); on an H100 simulating a 4060 Ti (4B, T = 2048: 137 MiB) a margin of 16 or 64 MiB
  ran out of memory right after the KV cache was allocated and 300 MiB started (lab fixtures).
- MTP: the drafter's forward over the same chunk keeps its fc input (T x 2h) and output (T x h).
- Allocator growth with the prompt length: measured on an H100 (4B, eager, 30,000-token prompt:
  max reserved +2 MiB), a coefficient `runtime_growth_per_prompt_token_bytes`, refitted by `fit` from
  probe verify records.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .model.arch import ModelArch
from .units import cdiv

FLA_CHUNK = 64  # vLLM fla/ops/utils.py FLA_CHUNK_SIZE


@dataclass(frozen=True)
class Term:
    name: str
    bytes: int
    source: str
    measured: bool  # False: derived from source or an estimate


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
    terms: tuple[Term, ...]
    margin_bytes: int  # free at start - budget: what serving may use beyond the budget
    prompt_tokens: int

    @property
    def need_bytes(self) -> int:
        return sum(t.bytes for t in self.terms)

    @property
    def serves(self) -> bool:
        return self.margin_bytes >= self.need_bytes

    @property
    def measured(self) -> bool:
        return all(t.measured for t in self.terms)


def runtime_need(a: ModelArch, *, tokens: int, tp: int, mtp: bool, gdn_path: str, prompt_tokens: int,
                 growth_per_prompt_token: float, growth_source: str, margin_bytes: int,
                 backend: tuple[str, int, str] | None = None) -> RuntimeNeed:
    """What a prompt of `prompt_tokens` needs outside the budget, term by term; `backend` is the
    attention backend's (name, bytes it allocates at the first request, source)."""
    terms: list[Term] = []
    if backend and backend[1]:
        terms.append(Term(f"{backend[0]}: workspace (first request)", backend[1], backend[2], True))
    if a.is_hybrid:
        live = gdn_prefill_live_bytes(a, tokens, tp)
        src = (f"GDN chunked prefill live set, one layer, {tokens} tokens a chunk ({gdn_path}; vLLM 0.20.2 "
               "fla/ops allocation sizes)")
        terms.append(Term("GDN prefill live tensors", live, src, False))
    if mtp:
        terms.append(Term("MTP drafter chunk buffers", mtp_prefill_bytes(a, tokens, mtp),
                          "drafter fc input (2h) + output (h) per chunk token, bf16", False))
    terms.append(Term("allocator growth with the prompt", int(growth_per_prompt_token * prompt_tokens),
                      growth_source, True))
    return RuntimeNeed(tuple(terms), margin_bytes, prompt_tokens)


def eager_warmup_bytes(mlp_width: int, tokens: int, tp: int = 1) -> int:
    """Eager mode: after the KV cache is allocated, vLLM's kernel warmup runs a dummy forward of
    `tokens` tokens again; it must find two MLP intermediates (tokens x width/tp, bf16) outside the
    budget (bytes). An estimate bounded by four H100 lab startups (vLLM 0.20.2): Qwen3.5-9B, 8192
    tokens (192 MiB each): 143 MiB failed ("Tried to allocate 192.00 MiB"), 389 MiB started;
    Qwen3.5-4B, 2048 tokens (36 MiB each): 16 and 64 MiB failed, 300 MiB started."""
    return 2 * tokens * max(1, mlp_width // tp) * 2


def max_serving_gmu(total_bytes: int, free_at_start: int, need_bytes: int) -> float | None:
    """Largest GMU (0.01 steps) whose budget leaves `need_bytes` of the free memory unbudgeted."""
    g = math.floor((free_at_start - need_bytes) / total_bytes * 100 + 1e-9) / 100
    while g > 0 and free_at_start - math.ceil(total_bytes * g) < need_bytes:
        g = round(g - 0.01, 2)
    return g if g > 0 else None
