"""What torch's CUDA caching allocator adds to the weights vLLM loads. Every parameter is an allocation of its own;
one of 10 MiB or more takes a segment rounded up to a multiple of 2 MiB, and the rest of the segment is split off
only when it is more than 1 MiB, else it stays with the block and counts as allocated (torch 2.x
CUDACachingAllocator: kMinLargeAlloc, kRoundLarge, should_split's kSmallSize; without expandable_segments). vLLM's
"Model loading took" is the change in allocated memory, so that rest shows as weights: Qwen3.8-27B-FP8 at TP 2,
about 0.15 GiB a rank (its 15, 35 and 85 MiB projections; a replay of its allocations under torch 2.11 on an H100:
151.7 MiB), 0.06 at TP 1; bf16 2 MiB at TP 1, 63 MiB at TP 2. vLLM 0.26.0's own loads, recorded
(lab-vllm-0.26.0-h100/moe-forward/load-*): Qwen3-8B 2 MiB, Qwen3-30B-A3B 1 MiB, Nemotron-3 Nano 103 MiB (this rule
gives it 76: some of its projections' sizes differ from the config's; not traced)."""

from __future__ import annotations

import re
from typing import Iterable

MiB = 1 << 20
LARGE = 10 * MiB  # kMinLargeAlloc: from here a segment of its own, rounded to ROUND
ROUND = 2 * MiB  # kRoundLarge
SPLIT_ABOVE = MiB  # kSmallSize: a larger rest is split off and reused; a smaller one stays allocated
SMALL_SEGMENT = 2 * MiB  # kSmallBuffer: the segment of a request of 1 MiB or less (the small pool)
MID_SEGMENT = 20 * MiB  # kLargeBuffer: the segment of a request between 1 and 10 MiB
MIN_BLOCK = 512  # kMinBlockSize: every request is rounded up to a multiple of it

# vLLM's fused parameters: a layer's q/k/v (QKVParallelLinear), gate/up (MergedColumnParallelLinear), a GDN layer's
# qkv/z and b/a projections, and the routed experts of a layer as one 3-D tensor each for w13 and w2
_FUSE = [(re.compile(r"\.experts\.\d+\."), ".experts."),
         (re.compile(r"\.experts\.(gate_proj|up_proj)$"), ".experts.w13"),
         (re.compile(r"\.experts\.down_proj$"), ".experts.w2"),
         (re.compile(r"\.(q_proj|k_proj|v_proj)$"), ".qkv_proj"),
         (re.compile(r"\.(gate_proj|up_proj)$"), ".gate_up_proj"),
         (re.compile(r"\.(in_proj_qkv|in_proj_z)$"), ".in_proj_qkvz"),
         (re.compile(r"\.(in_proj_b|in_proj_a)$"), ".in_proj_ba")]
_NOT_A_WEIGHT = re.compile(r"(scale|scales|zeros|qzeros|g_idx|bias|scale_inv)$")


def parameter(name: str) -> str | None:
    """The vLLM parameter a checkpoint tensor (or a config Tensor record) loads into; None for what is not a weight
    matrix (scales, zero points, biases: small allocations)."""
    name = re.sub(r"\.(weight|qweight|weight_packed)$", "", name)
    if _NOT_A_WEIGHT.search(name):
        return None
    for pat, repl in _FUSE:
        name = pat.sub(repl, name)
    return name


def rest_of_segment(size: int) -> int:
    """Bytes an allocation of `size` bytes holds beyond its size: its segment's rest where not split off."""
    if size < LARGE:
        return 0
    rest = -size % ROUND
    return rest if rest <= SPLIT_ABOVE else 0


def load_holes_bytes(sizes: Iterable[int], max_split: int) -> int:
    """Free bytes left inside the segments of allocations made in this order and all kept (a model's weights, bytes
    each), under max_split_size `max_split` (0: none): torch's caching allocator takes the best-fitting free block of
    its pool, a request below max_split never one of max_split or more; it splits off a rest of more than 1 MiB (small
    pool: 512 B) where the request is below max_split. These holes are reserved, not allocated: vLLM's 'weights
    memory' leaves them out and 'total consumed' counts them. vLLM 0.26-0.33 loads under max_split_size_mb=20
    (v1/worker/gpu_worker.py load_model). Qwen2.5-VL-7B's tower: 86.7 MiB (helper note q25vl-kept.md, a replay of
    the allocator's rules; its three logs with the tower keep 0.09 GiB more than without)."""
    cap = max_split or 1 << 62
    pools: dict[bool, list[int]] = {True: [], False: []}
    for raw in sizes:
        size = max(MIN_BLOCK, -(-raw // MIN_BLOCK) * MIN_BLOCK)
        small = size <= SPLIT_ABOVE
        pool = pools[small]
        fits = [b for b in pool if b >= size and not (size < cap <= b) and not (size >= cap and b >= size + MID_SEGMENT)]
        if fits:
            block = min(fits)
            pool.remove(block)
        else:
            block = SMALL_SEGMENT if small else MID_SEGMENT if size < LARGE else -(-size // ROUND) * ROUND
        rest = block - size
        if rest >= MIN_BLOCK if small else (size < cap and rest > SPLIT_ABOVE):
            pool.append(rest)
    return sum(pools[True]) + sum(pools[False])


def rounding_bytes(weights: Iterable[tuple[str, int]]) -> int:
    """What the allocator adds over weight matrices given as (name, bytes on this rank): summed per vLLM parameter,
    then each parameter's rest of segment."""
    params: dict[str, int] = {}
    for name, size in weights:
        key = parameter(name)
        if key is not None:
            params[key] = params.get(key, 0) + size
    return sum(rest_of_segment(s) for s in params.values())
