"""vLLM's KV cache plan, reproduced exactly: block size, groups and padding layers, number of
blocks, concurrency, the logged "GPU KV cache size" and the longest max_model_len that starts.

Pure arithmetic over the specs of `kv/spec.py`; version differences come from `vllm_rules.py`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..errors import UserError
from ..layers.base import CacheContext, LayerKind
from ..model.arch import SLIDING, ModelArch
from .spec import AttentionSpec, MambaSpec, SlidingWindowSpec
from ..units import GiB, cdiv
from ..vllm_rules import VllmRules

DENSE_BLOCK_SIZE = 16  # FlashAttention / FlashInfer default block on CUDA


@dataclass(frozen=True)
class Bucket:
    """Layers that share one spec; vLLM splits a bucket into groups of `group_size` layers."""

    kind: LayerKind
    spec: AttentionSpec | MambaSpec
    num_layers: int


@dataclass(frozen=True)
class KVLayout:
    """How the KV cache is laid out, before any memory is known."""

    buckets: tuple[Bucket, ...]
    block_size: int  # tokens per attention block
    group_size: int  # layers per KV cache group
    page_size_bytes: int  # one block of one layer (uniform across groups)
    hybrid: bool
    # a pipeline stage: the layers one of its pools holds (the largest of the whole model's groups projected onto
    # its layers; 0: group_size, the whole model on one worker)
    pool_layers: int = 0

    @property
    def bytes_per_block(self) -> int:
        """Memory one block id costs across a pool's layers on this worker (bytes)."""
        return (self.pool_layers or self.group_size) * self.page_size_bytes

    def groups(self, b: Bucket) -> int:
        return cdiv(b.num_layers, self.group_size)

    def padding(self, b: Bucket) -> int:
        rem = b.num_layers % self.group_size
        return self.group_size - rem if rem else 0

    @property
    def padding_layers(self) -> int:
        return sum(self.padding(b) for b in self.buckets)

    @property
    def padding_warnings(self) -> list[tuple[int, float]]:
        """vLLM's "Add P padding layers, may waste at most X%" lines, one per padded bucket."""
        return [(self.padding(b), round(self.padding(b) / b.num_layers * 100, 2))
                for b in self.buckets if self.padding(b)]

    @property
    def num_groups(self) -> int:
        return sum(self.groups(b) for b in self.buckets)

    def blocks_per_request(self, tokens: int) -> int:
        """Block ids one request of `tokens` tokens holds (every group allocates its own)."""
        return sum(self.groups(b) * b.spec.blocks_for(tokens) for b in self.buckets)

    def bytes_per_request(self, tokens: int) -> int:
        return self.blocks_per_request(tokens) * self.bytes_per_block


def hybrid_block_size(attn_bytes_per_token: int, mamba_state_bytes: int, multiple: int) -> int:
    """Smallest multiple of `multiple` tokens whose attention page holds one mamba page."""
    return multiple * cdiv(mamba_state_bytes, multiple * attn_bytes_per_token)


def group_size(counts: list[int]) -> int:
    """vLLM's heuristic: the smallest bucket, or the largest when it is < 1.5x the smallest."""
    lo, hi = min(counts), max(counts)
    return hi if hi < lo * 1.5 else lo


def unify_pages(buckets: list[Bucket], name: str) -> list[Bucket]:
    """vLLM's unify_kv_cache_spec_page_size for attention buckets: a smaller page grows its block size by the
    ratio to the largest page; a ratio that is not whole cannot be unified (vLLM raises)."""
    page = max(b.spec.page_size_bytes for b in buckets)
    out = []
    for b in buckets:
        if page % b.spec.page_size_bytes:
            raise UserError(f"{name}: vLLM cannot unify KV pages of {b.spec.page_size_bytes:,} and {page:,} bytes "
                            "(not a whole ratio); this layout is not modelled")
        out.append(replace(b, spec=replace(b.spec, block_size=b.spec.block_size * page // b.spec.page_size_bytes)))
    return out


@dataclass(frozen=True)
class DraftLayers:
    """An external drafter's KV-cache layers of one kind, per rank (drafter.py says which kinds a version builds)."""

    kind: str  # FULL or SLIDING
    count: int
    num_kv_heads: int  # per rank
    head_dim: int
    window: int | None = None


def _merge(buckets: list[Bucket]) -> list[Bucket]:
    """vLLM groups layers whose KV spec is equal: buckets with the same kind and spec become one."""
    out: list[Bucket] = []
    for b in buckets:
        same = next((i for i, o in enumerate(out) if o.kind == b.kind and o.spec == b.spec), None)
        if same is None:
            out.append(b)
        else:
            out[same] = replace(out[same], num_layers=out[same].num_layers + b.num_layers)
    return out


def _draft_buckets(draft: tuple[DraftLayers, ...], kv_dtype_bytes: int, block: int, kv_scale_bytes: int,
                   in_flight_tokens: int) -> list[Bucket]:
    out = []
    for dl in draft:
        if dl.kind == SLIDING:
            out.append(Bucket(LayerKind.SLIDING, SlidingWindowSpec(dl.num_kv_heads, dl.head_dim, kv_dtype_bytes, block,
                                                           kv_scale_bytes, window=dl.window or 4096,
                                                           in_flight_tokens=in_flight_tokens), dl.count))
        else:
            out.append(Bucket(LayerKind.FULL, AttentionSpec(dl.num_kv_heads, dl.head_dim, kv_dtype_bytes, block,
                                                         kv_scale_bytes), dl.count))
    return out


def stage_pool_layers(layout: KVLayout, kinds: list[LayerKind], first: int, count: int) -> int:
    """The layers one pool holds on a pipeline stage of layers [first, first + count): vLLM groups the whole model's
    layers (each kind's, in layer order, group_size at a time), then projects every group onto each worker's layers
    and sizes its pools by the largest projection; every group, empty ones too, still takes blocks for a request
    (v1/core/kv_cache_utils.py get_kv_cache_configs, _project_kv_cache_groups_to_worker, 0.26.0). `kinds`: each
    decoder layer's cache kind (None for a layer without one)."""
    from ..errors import UserError

    largest = 0
    for b in layout.buckets:
        at = [i for i, k in enumerate(kinds) if k == b.kind]
        if len(at) != b.num_layers:
            raise UserError("pipeline stages of a model whose cache kinds split into several specs are not modelled")
        for g in range(0, len(at), layout.group_size):
            largest = max(largest, sum(first <= i < first + count for i in at[g:g + layout.group_size]))
    return largest


def _kind_buckets(mixers: list, ctx: CacheContext) -> list[Bucket]:
    """One bucket per (kind, spec), in the kinds' order (LayerKind), counting the layers that share it."""
    out: list[Bucket] = []
    for m in sorted(mixers, key=lambda m: m.kind.order):
        out = _merge(out + [Bucket(m.kind, m.cache_spec(ctx), 1)])
    return out


def build_layout(arch: ModelArch, *, kv_dtype_bytes: int, spec_tokens: int, draft_attention_layers: int,
                 tp: int, mamba_blocks: int, block_multiple: int, max_num_batched_tokens: int,
                 in_flight_batches: int = 1, kv_scale_bytes: int = 0,
                 drafter: tuple[DraftLayers, ...] = (), mla_block_size: int = 16, mla_fp8_ds: bool = False) -> KVLayout:
    """Buckets, block size and groups for a model, from its layers' own cache specs (layers/): layers whose spec is
    equal share a bucket; an MTP drafter's attention layers (the target's spec) join it, an external drafter's
    layers join a bucket only where their spec is equal. Where some layers keep a fixed state (GatedDeltaNet,
    Mamba2) the attention block is raised to a multiple of `block_multiple` tokens until one attention page holds a
    state page, and the state page is padded to the attention page. `mamba_blocks` = blocks one request holds per
    state group; a sliding-window layer keeps its window plus `in_flight_batches` x max_num_batched_tokens."""
    in_flight = in_flight_batches * max_num_batched_tokens
    ctx = CacheContext(kv_dtype_bytes, arch.dtype, tp, spec_tokens, mamba_blocks, in_flight, kv_scale_bytes,
                       DENSE_BLOCK_SIZE, mla_block_size, mla_fp8_ds)
    mixers = [layer.mixer for layer in arch.layers if layer.mixer is not None]  # MLP-only layers hold no cache
    if draft_attention_layers:
        mixers += [arch.mtp_layer.mixer] * draft_attention_layers
    buckets = _kind_buckets(mixers, ctx)
    attention = [b for b in buckets if not b.kind.has_state]
    states = [b for b in buckets if b.kind.has_state]
    if len({b.spec for b in states}) > 1:
        raise UserError(f"{arch.name}: state layers of more than one shape are not modelled")
    if states:
        if not attention:
            raise UserError(f"{arch.name}: a model of state layers only (no attention) is not modelled")
        full = next((b for b in attention if b.kind == LayerKind.FULL), attention[0])
        block = hybrid_block_size(full.spec.bytes_per_token, states[0].spec.state_bytes, block_multiple)
        attention = unify_pages(_merge([replace(b, spec=replace(b.spec, block_size=block)) for b in attention]
                                       + _draft_buckets(drafter, kv_dtype_bytes, block, kv_scale_bytes, in_flight)),
                                arch.name)
        page = max(b.spec.page_size_bytes for b in attention)
        buckets = attention + [replace(b, spec=replace(b.spec, page_size_padded=page)) for b in states]
        block_size = block
    else:
        buckets = unify_pages(_merge(attention + _draft_buckets(drafter, kv_dtype_bytes, DENSE_BLOCK_SIZE,
                                                                kv_scale_bytes, in_flight)), arch.name)
        block_size = min(b.spec.block_size for b in buckets)
    buckets = [b for b in buckets if b.num_layers]
    return KVLayout(tuple(buckets), block_size=block_size, group_size=group_size([b.num_layers for b in buckets]),
                    page_size_bytes=max(b.spec.page_size_bytes for b in buckets), hybrid=bool(states))


@dataclass(frozen=True)
class KVPlan:
    """The plan for a given KV memory: what vLLM allocates and logs."""

    layout: KVLayout
    available_bytes: int
    max_model_len: int
    num_blocks: int
    blocks_per_request: int
    max_concurrency: float
    kv_cache_tokens: int  # what vLLM logs as "GPU KV cache size: N tokens"
    ceiling: int  # longest max_model_len whose one request fits (0: none)
    fits: bool
    notes: list[str] = field(default_factory=list)


def ceiling_tokens(layout: KVLayout, check_bytes: int) -> int:
    """Largest L (tokens) with blocks_per_request(L) <= check_bytes // bytes_per_block; vLLM's
    auto-fit bisection lands on the same value (a multiple of the block size)."""
    budget = check_bytes // layout.bytes_per_block if check_bytes > 0 else 0
    if layout.blocks_per_request(1) > budget:
        return 0
    lo, hi = 1, 1 << 26
    # a request's blocks grow at least one per block of tokens while any bucket is unbounded: start the bisection
    # there (a layout whose blocks stop growing, all sliding windows, searches the whole range as before)
    near = min(hi, (budget + 1) * max(getattr(bk.spec, "block_size", 1) for bk in layout.buckets) + 1)
    if layout.blocks_per_request(near) > budget:
        hi = near
    elif layout.blocks_per_request(hi) <= budget:
        return hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if layout.blocks_per_request(mid) <= budget:
            lo = mid
        else:
            hi = mid
    return lo


def reserved_bytes(layout: KVLayout, rules: VllmRules) -> int:
    """KV memory the version keeps back from the ceiling check (0.33: one null block)."""
    return rules.reserved_null_blocks * layout.bytes_per_block


def kv_needed_bytes(layout: KVLayout, tokens: int, rules: VllmRules) -> int:
    """KV memory a max_model_len of `tokens` needs to start (one request, plus what is kept back)."""
    return layout.bytes_per_request(tokens) + reserved_bytes(layout, rules)


def ceiling_for(layout: KVLayout, available_bytes: int, rules: VllmRules) -> int:
    """Longest max_model_len (tokens) that `available_bytes` of KV memory starts."""
    return ceiling_tokens(layout, available_bytes - reserved_bytes(layout, rules))


def plan_kv(layout: KVLayout, available_bytes: int, max_model_len: int, rules: VllmRules) -> KVPlan:
    """Number of blocks, capacity and ceiling for `available_bytes` of KV memory."""
    num_blocks = max(0, available_bytes) // layout.bytes_per_block
    per_req = layout.blocks_per_request(max_model_len)
    concurrency = num_blocks / per_req if per_req else 0.0
    if rules.kv_tokens_formula == "groups":
        tokens = num_blocks // layout.num_groups * layout.block_size
    else:
        tokens = int(concurrency * max_model_len)
    ceiling = ceiling_for(layout, available_bytes, rules)
    return KVPlan(layout, available_bytes, max_model_len, num_blocks, per_req, concurrency, tokens,
                  ceiling, fits=ceiling >= max_model_len)


def plan_startup(layout: KVLayout, available_bytes: int, max_model_len: int, auto_fit: bool,
                 rules: VllmRules) -> KVPlan:
    """The plan vLLM logs at startup: with auto-fit (--max-model-len -1) the length is first lowered
    to the ceiling, and the KV cache tokens and concurrency are for that length."""
    plan = plan_kv(layout, available_bytes, max_model_len, rules)
    fitted = min(plan.ceiling, max_model_len) if auto_fit else max_model_len
    return plan if fitted == max_model_len else plan_kv(layout, available_bytes, max(fitted, 1), rules)


def reproduces_within_rounding(layout: KVLayout, available_gib: float, max_model_len: int, kv_cache_tokens: int,
                               rules: VllmRules, model_max: int) -> bool:
    """Whether some whole number of blocks inside a logged available memory's 0.01 GiB rounding gives vLLM's
    logged "GPU KV cache size" and max_model_len exactly (the length either the model's maximum, which fits,
    or vLLM's auto-fit ceiling)."""
    for n in rounding_band_blocks(layout, available_gib):
        plan = plan_kv(layout, n * layout.bytes_per_block, max_model_len, rules)
        if plan.kv_cache_tokens != kv_cache_tokens:
            continue
        if (max_model_len == model_max and plan.ceiling >= max_model_len) or plan.ceiling == max_model_len:
            return True
    return False


def rounding_band_blocks(layout: KVLayout, available_gib: float) -> range:
    """Whole numbers of blocks whose memory lies inside a logged available memory's 0.01 GiB rounding."""
    bpb = layout.bytes_per_block
    return range(max(int((available_gib - 0.005) * GiB) // bpb, 0), cdiv(int((available_gib + 0.005) * GiB), bpb) + 1)


def tokens_within_rounding(layout: KVLayout, available_gib: float, max_model_len: int, kv_cache_tokens: int,
                           rules: VllmRules) -> bool:
    """Whether some whole number of blocks inside the logged available memory's rounding gives vLLM's logged
    "GPU KV cache size" at the logged max_model_len (a log with an explicit length: no auto-fit to reproduce)."""
    return any(plan_kv(layout, n * layout.bytes_per_block, max_model_len, rules).kv_cache_tokens == kv_cache_tokens
               for n in rounding_band_blocks(layout, available_gib))


def block_table_bytes(layout: KVLayout, max_num_seqs: int, max_model_len: int) -> int:
    """The GPU block tables vLLM's model runner keeps once the KV cache is planned (v1/worker/block_table.py
    MultiGroupBlockTable, 0.20-0.33): one int32 table per KV group of max_num_seqs rows x the blocks one request of
    max_model_len may hold, rounded up to a multiple of 128 // block_size for blocks of up to 128 tokens. Allocated
    after the profile, outside vLLM's budget: small for most models, GiB for a 10M-token context in 16-token blocks
    (bytes)."""
    step = _table_row_multiple(layout.block_size)
    blocks = cdiv(cdiv(max_model_len, layout.block_size), step) * step
    return layout.num_groups * max_num_seqs * blocks * 4


def block_table_ceiling(layout: KVLayout, max_num_seqs: int, room_bytes: int) -> int:
    """The longest max_model_len whose block tables fit in `room_bytes` (tokens, a whole number of blocks)."""
    per_block = layout.num_groups * max_num_seqs * 4
    if room_bytes < per_block:
        return 0
    step = _table_row_multiple(layout.block_size)
    return room_bytes // per_block // step * step * layout.block_size


def _table_row_multiple(block_size: int) -> int:
    """The blocks a block table's row is rounded up to a multiple of (MultiGroupBlockTable: 128 // block_size)."""
    return 128 // block_size if block_size <= 128 else 1
