"""The checks vLLM makes while it starts that refuse a deployment whatever its max_model_len (the KV-too-small check
for one length stays in predict.py, beside the ceiling). Each is read in vLLM's source per version (vllm_rules.py
says which a version has) and answers with the message vLLM would print and the one change that makes it start.
Pure: a deployment, its budget and its KV plan in."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

from .deployment import Deployment
from .kv.planner import KVPlan


class Check(str, Enum):
    """vLLM's checks that refuse flags at any length (the values are the JSON's)."""

    MAMBA_CACHE_BLOCKS = "mamba_cache_blocks"
    BATCHED_TOKENS_BELOW_SEQS = "batched_tokens_below_seqs"
    ALIGN_BLOCK_SIZE = "align_block_size"
    FREE_MEMORY_BELOW_BUDGET = "free_memory_below_budget"


@dataclass(frozen=True)
class StartCheck:
    """One refusal vLLM makes at startup: whether it passes, the figure it compares (`value`) against its `limit`,
    vLLM's own message with the predicted figures, and the fix."""

    check: Check
    passes: bool
    value: int
    limit: int
    vllm_message: str
    fix: str
    source: str  # where in vLLM's source the check is
    max_num_seqs_that_starts: int | None = None  # where lowering max_num_seqs is the fix (set by predict.py)

    def to_json(self) -> dict[str, Any]:
        return {"check": self.check.value, "passes": self.passes, "value": self.value, "limit": self.limit,
                "vllm_message": self.vllm_message, "fix": self.fix, "source": self.source,
                "max_num_seqs_that_starts": self.max_num_seqs_that_starts}

    @property
    def text(self) -> str:
        return f"vLLM refuses: {self.vllm_message} Fix: {self.fix}"


def mamba_check_applies(d: Deployment, hybrid: bool, graph_mode: str) -> bool:
    """Whether vLLM's Mamba-block check compares max_num_seqs with the KV cache's blocks: a version that raises it,
    a layout with Mamba-type state, FULL CUDA graphs."""
    return d.rules.mamba_block_check == "raise" and hybrid and "FULL" in graph_mode


def mamba_block_check(d: Deployment, plan: KVPlan, graph_mode: str) -> StartCheck | None:
    """vLLM 0.20+ (config/compilation.py resolve_cudagraph_mode_and_sizes, 0.20.2-0.33.0 word for word): with FULL
    CUDA graphs left after the backends' downgrades and any Mamba-type state layer (GatedDeltaNet, Mamba1/2, short
    conv, linear attention), max_num_seqs may not exceed the KV cache's blocks: each decode sequence in a graph
    holds one state block. The blocks are the shared pool (the null block included), so max_model_len does not
    change them; speculative tokens are not counted. None where the check does not apply."""
    if not mamba_check_applies(d, plan.layout.hybrid, graph_mode):
        return None
    blocks, seqs = plan.num_blocks, d.max_num_seqs
    message = (f"max_num_seqs ({seqs}) exceeds available Mamba cache blocks ({blocks}). Each decode sequence requires "
               "one Mamba cache block, so CUDA graph capture cannot proceed.")
    return StartCheck(Check.MAMBA_CACHE_BLOCKS, seqs <= blocks, seqs, blocks, message,
                      f"--max-num-seqs {blocks} or fewer (CUDA graphs), --enforce-eager, or a higher "
                      "--gpu-memory-utilization; a shorter max_model_len does not help",
                      "vllm/config/compilation.py CompilationConfig.resolve_cudagraph_mode_and_sizes (0.20.2-0.33.0)")


def batched_tokens_check(d: Deployment) -> StartCheck | None:
    """Every version (config/scheduler.py SchedulerConfig.verify_max_model_len): max_num_batched_tokens below
    max_num_seqs is refused (a defaulted max_num_seqs is lowered to it first, so only a given one trips it)."""
    if d.max_num_batched_tokens >= d.max_num_seqs:
        return None
    return StartCheck(Check.BATCHED_TOKENS_BELOW_SEQS, False, d.max_num_batched_tokens, d.max_num_seqs,
                      f"max_num_batched_tokens ({d.max_num_batched_tokens}) must be greater than or equal to "
                      f"max_num_seqs ({d.max_num_seqs}).",
                      f"--max-num-batched-tokens {d.max_num_seqs} or more, or --max-num-seqs {d.max_num_batched_tokens}",
                      "vllm/config/scheduler.py SchedulerConfig.verify_max_model_len (0.19.1-0.33.0)")


def align_block_check(d: Deployment, plan: KVPlan) -> StartCheck | None:
    """vLLM 0.19-0.26 (config/vllm.py validate_block_size, an assert): in Mamba 'align' mode (prefix caching on a
    hybrid) the attention block, raised to hold a state page, may not exceed max_num_batched_tokens."""
    if not d.rules.align_block_assert or d.mamba_mode != "align" or not plan.layout.hybrid:
        return None
    block = plan.layout.block_size
    if block <= d.max_num_batched_tokens:
        return None
    return StartCheck(Check.ALIGN_BLOCK_SIZE, False, block, d.max_num_batched_tokens,
                      f"In Mamba cache align mode, block_size ({block}) must be <= max_num_batched_tokens "
                      f"({d.max_num_batched_tokens}).",
                      f"--max-num-batched-tokens {block} or more, or drop --enable-prefix-caching",
                      "vllm/config/vllm.py VllmConfig.validate_block_size (0.19.1-0.26.0)")


def start_checks(d: Deployment, plan: KVPlan, graph_mode: str) -> list[StartCheck]:
    """The checks that apply to this deployment, passing or not."""
    return [c for c in (batched_tokens_check(d), align_block_check(d, plan), mamba_block_check(d, plan, graph_mode))
            if c is not None]
