"""Weight bytes per rank: from the architecture and quantization config (pure), or exactly from
safetensors headers (see `checkpoint.py`).

Each tensor the model loads is listed with its shape and whether it is a quantizable Linear;
a `QuantScheme` turns a Linear's (in, out) into bytes the way its checkpoint format stores it.
Modules that stay unquantized whatever the config says: embeddings, norms, the GDN conv and gates
(in_proj_b/a, A_log, dt_bias), MoE routers, the vision tower, and everything named in the ignore list.
The MTP drafter's layers follow the config like the model's (vLLM builds them with the target's
quant_config: Qwen/Qwen3.6-27B-FP8 stores them in fp8, the Lorbus AutoRound export in int4).
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, replace
from typing import Any, Iterator

from .arch import ModelArch
from ..errors import UserError
from .allocator import rounding_bytes
from ..hardware.facts import Int4Load
from ..layers.base import NEVER_QUANTIZED, DecoderLayer, Role, Tensor
from ..units import cdiv, dtype_bytes

VOCAB_PADDING = 64  # vLLM pads vocab-parallel embeddings to a multiple of 64 rows

# The 4-bit formats vLLM loads through its AutoAWQ / AutoGPTQ methods (Machete or Marlin): what `Int4Load` measured
INT4_LOAD_METHODS = ("awq", "gptq")


def ignored(name: str, pattern: str) -> bool:
    """Whether a checkpoint's ignore entry (modules_to_not_convert, ignore, exclude_modules) keeps tensor `name`
    unquantized, as vLLM 0.33 matches them: 're:' a regular expression (compressed-tensors); a wildcard entry a glob,
    'X*' also X itself (ModelOpt's exclude_modules, modelopt.py fnmatch); a dot-free entry a whole component of the
    module path, never part of one (FP8's exact module match: 'gate' is MiniMax-M2's router, not its experts'
    gate_proj); a dotted entry the module path or a part of it."""
    if not pattern:
        return False
    if pattern.startswith("re:"):
        return re.match(pattern[3:], name) is not None
    if "*" in pattern or "?" in pattern:
        stem = pattern[:-1] if pattern.endswith("*") else None
        return fnmatch.fnmatchcase(name, pattern) or (stem is not None and (name == stem or name.startswith(stem + ".")))
    if "." not in pattern:
        return pattern in name.split(".")
    return pattern in name or name.endswith(pattern)


@dataclass(frozen=True)
class QuantScheme:
    """How a quantized Linear is stored. method: none|fp8|awq|gptq|int-pack|nvfp4."""

    method: str = "none"
    bits: int = 16
    group_size: int = -1  # -1: one group per output channel (whole input row)
    zero_point: bool = False  # the checkpoint stores zero points (AWQ, GPTQ)
    symmetric: bool = False  # GPTQ sym: its stored zero points are not used by the kernel
    act_order: bool = False
    fp8_block: tuple[int, int] | None = None
    ignore: tuple[str, ...] = ()
    only: tuple[str, ...] = ()  # AutoRound's block_name_to_quantize: name prefixes; empty = every Linear
    quantize_lm_head: bool = False
    load: Int4Load = Int4Load()
    mxfp4_backend: str = "triton"  # the MXFP4 MoE kernel the GPU runs (gpu_facts.json mxfp4_moe_backends)

    def quantizes(self, t: Tensor) -> bool:
        if self.method == "none" or not t.linear:
            return False
        if self.method == "mxfp4":  # gpt-oss: the routed experts only (vLLM's GptOssMxfp4Config)
            return t.role is Role.EXPERTS
        if t.role is Role.LM_HEAD:
            return self.quantize_lm_head
        if t.role in NEVER_QUANTIZED or t.part == "vision":  # no weight-only quantizer in common use converts them
            return False
        if self.only and not any(t.name.startswith(block) for block in self.only):
            return False
        return not any(ignored(t.name, pat) for pat in self.ignore)

    def values_bytes(self, n: int) -> int:
        """Bytes of `n` quantized weight values as stored (packed), without their scales."""
        if self.method == "fp8":
            return n
        if self.method == "nvfp4":
            return n // 2  # e2m1 pairs
        if self.method in ("awq", "gptq", "int-pack"):
            return n * self.bits // 8
        raise UserError(f"quantization method {self.method!r} is not modelled")

    def linear_bytes(self, in_f: int, out_f: int) -> int:
        """Bytes of one quantized Linear weight (in_f inputs, out_f outputs) and its scales."""
        n = in_f * out_f
        g = in_f if self.group_size in (-1, 0, None) else self.group_size
        groups = cdiv(in_f, g)
        if self.method == "fp8":
            if self.fp8_block:
                bo, bi = self.fp8_block
                return n + cdiv(out_f, bo) * cdiv(in_f, bi) * 4
            return n + out_f * 4 if self.group_size == -2 else n + 8  # per-channel | per-tensor
        if self.method == "nvfp4":
            return self.values_bytes(n) + cdiv(n, 16) + 8  # one fp8 scale per 16 + global scales
        if self.method in ("awq", "gptq", "int-pack"):
            packed = self.values_bytes(n)
            scales = groups * out_f * 2
            zeros = groups * out_f * self.load.zero_point_bytes(self.symmetric, self.bits) if self.zero_point else 0.0
            stores_g_idx = self.act_order or self.method == "gptq"
            g_idx = in_f * 4 if stores_g_idx and self.load.keeps_g_idx(self.act_order) else 0
            extra = groups * out_f * self.load.extra_bytes_per_group if self.method in INT4_LOAD_METHODS else 0.0
            return int(packed + scales + zeros + g_idx + extra)
        raise UserError(f"quantization method {self.method!r} is not modelled")


def _whole(q: dict[str, Any], *keys: str, default: int, group: bool = False) -> int:
    """A whole number of a quantization config (the first of `keys` it has, else `default`), refused in one line
    where vLLM could not read it; a group size is -1 (one group per output channel) or positive."""
    key = next((k for k in keys if q.get(k) is not None), None)
    value = q.get(key, default) if key else default
    if isinstance(value, bool) or not isinstance(value, int) and not (isinstance(value, str) and
                                                                      value.strip().lstrip("-").isdigit()):
        raise UserError(f"quantization_config.{key} is {str(value)[:40]!r}, not a whole number: the checkpoint's "
                        "config is damaged or not one vLLM loads")
    n = int(value)
    if group and not (n == -1 or 0 < n <= 1 << 20):
        raise UserError(f"quantization_config.{key} is {n}: vLLM loads a group size of -1 (one group per output "
                        "channel) or a positive number of input columns, not this")
    if not group and not 0 < n <= 64:
        raise UserError(f"quantization_config.{key} is {n}: not a bit width vLLM loads")
    return n


def scheme_from_config(q: dict[str, Any] | None) -> QuantScheme:
    """Read a config.json `quantization_config` (AWQ, GPTQ, FP8, compressed-tensors, ModelOpt)."""
    if q is None:
        return QuantScheme()
    if not q.get("quant_method"):  # present but without its method: vLLM cannot pick a quantization to load
        raise UserError("config.json has a quantization_config without a quant_method "
                        f"({str(q)[:60]}): vLLM refuses to load it; fix the checkpoint's config")
    method = str(q.get("quant_method", "")).lower()
    ignore = tuple(q.get("modules_to_not_convert") or q.get("ignored_layers") or q.get("ignore")
                   or q.get("exclude_modules") or ())
    if method == "awq":
        if _whole(q, "bits", "w_bit", default=4) != 4:  # vLLM's AWQConfig: "only 4-bit weight quantization"
            raise UserError(f"quantization_config: AWQ with bits {q.get('bits', q.get('w_bit'))!r}; vLLM loads only "
                            "4-bit AWQ checkpoints")
        return QuantScheme("awq", 4, _whole(q, "group_size", "q_group_size", default=128, group=True),
                           zero_point=bool(q.get("zero_point", True)), ignore=ignore)
    if method in ("gptq", "gptq_marlin", "auto-round", "auto_round", "autoround"):
        return _gptq_packed(q, ignore)
    if method == "fp8":
        block = q.get("weight_block_size")
        return QuantScheme("fp8", 8, fp8_block=tuple(block) if block else None, ignore=ignore)
    if method in ("modelopt", "modelopt_fp4"):
        algo = str(q.get("quant_algo") or q.get("quantization", {}).get("quant_algo", "")).upper()
        if "FP4" in algo:  # vLLM keeps the MTP fc unquantized for NVFP4 (qwen3_5_mtp.py, 0.26)
            return QuantScheme("nvfp4", 4, 16, ignore=ignore + ("mtp.fc",))
        return QuantScheme("fp8", 8, ignore=ignore)
    if method == "compressed-tensors":
        return _compressed_tensors(q, ignore)
    if method == "mxfp4":
        return QuantScheme("mxfp4", 4, 32, ignore=ignore)
    raise UserError(f"quantization {method!r} is not modelled; supported: awq, gptq, fp8, "
                    "compressed-tensors (W4A16, W8A8-FP8, NVFP4), modelopt")


_REGEX_CHARS = set(r"*+?^$()[]{}|\\")  # an AutoRound extra_config key with one of these is a pattern


def _gptq_packed(q: dict[str, Any], ignore: tuple[str, ...]) -> QuantScheme:
    """GPTQ and AutoRound (GPTQ packing). AutoRound quantizes only the blocks named in
    block_name_to_quantize (every Linear but lm_head when absent) and keeps the extra_config layers
    whose bits are >= 16; an extra_config key with regex characters is a pattern searched in the
    layer's name (vLLM 0.26 inc/config_parser.py)."""
    kept = []
    for key, v in (q.get("extra_config") or {}).items():
        if isinstance(v, dict) and _whole(v, "bits", default=4) >= 16:
            kept.append(f"re:.*{key}" if any(c in _REGEX_CHARS for c in key) else key)
    blocks = q.get("block_name_to_quantize") or q.get("to_quant_block_names") or ()
    if isinstance(blocks, str):
        blocks = blocks.split(",")
    return QuantScheme("gptq", _whole(q, "bits", default=4), _whole(q, "group_size", default=128, group=True),
                       zero_point=True, symmetric=bool(q.get("sym", True)),
                       act_order=bool(q.get("desc_act", False)), ignore=ignore + tuple(kept),
                       only=tuple(b.strip() for b in blocks if b.strip()))


def _compressed_tensors(q: dict[str, Any], ignore: tuple[str, ...]) -> QuantScheme:
    groups = list((q.get("config_groups") or {}).values())
    if not groups:
        raise UserError("compressed-tensors config without config_groups")
    w = groups[0].get("weights") or {}
    fmt = str(q.get("format", "")).lower()
    bits, kind = _whole(w, "num_bits", default=8), str(w.get("type", "int"))
    targets = groups[0].get("targets") or []
    lm_head = any("lm_head" in str(t) for t in targets)
    if "nvfp4" in fmt or (kind == "float" and bits == 4):
        return QuantScheme("nvfp4", 4, 16, ignore=ignore, quantize_lm_head=lm_head)
    if kind == "float" and bits == 8:
        block = w.get("block_structure")
        strategy = str(w.get("strategy", "tensor"))
        return QuantScheme("fp8", 8, group_size=-2 if strategy == "channel" else -1,
                           fp8_block=tuple(block) if block else None, ignore=ignore, quantize_lm_head=lm_head)
    strategy = str(w.get("strategy", "group"))
    group = _whole(w, "group_size", default=128, group=True) if strategy == "group" else -1
    return QuantScheme("int-pack", bits, group, zero_point=not w.get("symmetric", True),
                       act_order=bool(w.get("actorder")) and w.get("actorder") != "weight",
                       ignore=ignore, quantize_lm_head=lm_head)


def decoder_layer_tensors(a: ModelArch, layer: DecoderLayer, prefix: str, part: str) -> Iterator[Tensor]:
    """One decoder layer's weights: its norms, its token mixer's and its feed-forward block's (layers/)."""
    yield Tensor(f"{prefix}.layernorms", a.extras.norms_per_layer * a.hidden_size, 1, linear=False, part=part)
    if layer.mixer is not None:
        yield from layer.mixer.tensors(prefix, part)
    if layer.ffn is not None:
        yield from layer.ffn.tensors(prefix, part)


def model_tensors(a: ModelArch) -> Iterator[Tensor]:
    """The language model's checkpoint weights as vLLM allocates them (vocab padded to 64); the buffers
    vLLM adds at load are `buffer_tensors`."""
    root = "model.language_model" if a.is_multimodal else "model"
    vocab = cdiv(a.vocab_size, VOCAB_PADDING) * VOCAB_PADDING
    if a.holds_embedding:
        yield Tensor(f"{root}.embed_tokens", vocab, a.hidden_size, linear=False, role=Role.EMBEDDING)
    for i, layer in enumerate(a.layers):
        yield from decoder_layer_tensors(a, layer, f"{root}.layers.{i}", "model")
    yield from a.extras.tensors
    yield Tensor(f"{root}.norm", a.hidden_size, 1, linear=False)
    if a.holds_lm_head and not a.tie_word_embeddings:
        yield Tensor("lm_head", a.hidden_size, vocab, role=Role.LM_HEAD)


def buffer_tensors(a: ModelArch) -> Iterator[Tensor]:
    """What vLLM allocates at load beside the checkpoint: one rotary cos/sin cache (max_position x rotary
    width, model dtype) per distinct rotary embedding, whole on every rank."""
    for rows, dim, nbytes in a.extras.rotary_caches:
        yield Tensor("rotary_emb.cos_sin_cache", rows, dim, linear=False, part="buffers", dtype_bytes=nbytes)


def mtp_tensors(a: ModelArch) -> Iterator[Tensor]:
    """The MTP drafter (Qwen3.5 / Qwen3-Next): full-attention decoder layers, fc 2h->h and
    three norms. It shares the target's embedding and lm_head, so they are not counted again."""
    h = a.hidden_size
    yield Tensor("mtp.fc", 2 * h, h, part="mtp")
    yield Tensor("mtp.pre_fc_norms+norm", 3 * h, 1, linear=False, part="mtp")
    for i in range(a.mtp_layers):
        yield from decoder_layer_tensors(a, a.mtp_layer, f"mtp.layers.{i}", "mtp")


@dataclass(frozen=True)
class WeightBytes:
    """Weight bytes per rank, split as vLLM's log splits them (target model vs MTP drafter)."""

    model: int
    mtp: int
    vision: int
    source: str  # "config" (computed from shapes) or "safetensors" (exact header sizes)

    @property
    def target(self) -> int:
        """Bytes of the served model without the drafter (the vision tower included when loaded)."""
        return self.model + self.vision


def tensor_bytes(t: Tensor, scheme: QuantScheme, model_dtype_bytes: int) -> int:
    if scheme.quantizes(t):
        return t.count * (scheme.linear_bytes(t.in_f, t.out_f) + (t.out_f * model_dtype_bytes if t.bias else 0))
    return t.numel * (t.dtype_bytes or model_dtype_bytes)


# a Qwen3.5-layout GDN layer's b/a projection (Qwen3-Next merges them interleaved and keeps them sharded)


def replicated_on_ranks(a: ModelArch, ba_replicated_int4: bool) -> frozenset[Role]:
    """The roles of linear tensors vLLM keeps whole on every tensor-parallel rank: the GDN b/a projection of a
    Qwen3.5-layout model under a 4-bit group-quantized checkpoint, where the vLLM version does so (vllm_rules)."""
    if ba_replicated_int4 and a.model_type.startswith("qwen3_5") and \
            scheme_from_config(a.quantization).method in INT4_LOAD_METHODS:
        return frozenset({Role.STATE_GATE})
    return frozenset()


# MXFP4 MoE kernels (vLLM 0.26 fused_moe/oracle/mxfp4.py mxfp4_round_up_hidden_size_and_intermediate_size and each
# backend's weight conversion): intermediate and hidden alignment, and the bytes of a bias value once converted
MXFP4_LAYOUTS = {"triton": (64, 1, 4), "marlin": (128, 256, 2), "trtllm": (256, 256, 4)}


def mxfp4_expert_bytes(t: Tensor, backend: str, tp: int) -> int:
    """One rank's bytes of a gpt-oss MXFP4 expert tensor (w13: hidden -> 2 x intermediate, w2: intermediate ->
    hidden) as the backend lays it out: the intermediate (per rank) and hidden rounded up to its alignment; packed
    4-bit values and one e8m0 scale per 32; biases in fp32 (Triton, TRT-LLM) or bf16 (Marlin). The Triton kernels on
    Hopper swizzle the values to rows of 16 and columns of 32 bytes and the scales to rows of 256 and an even count
    of groups rounded to 4 (triton_kernels HopperMXValueLayout / HopperMXScaleLayout)."""
    align_i, align_h, bias_bytes = MXFP4_LAYOUTS[backend]
    up = lambda x, m: -(-x // m) * m  # noqa: E731
    w13 = t.fuse == "w13"
    inter = up((t.out_f // 2 if w13 else t.in_f) // tp, align_i)
    hidden = up(t.out_f if not w13 else t.in_f, align_h) if align_h > 1 else (t.in_f if w13 else t.out_f)
    n, k = (2 * inter, hidden) if w13 else (hidden, inter)
    if backend == "triton":
        values = up(n, 16) * up(k // 2, 32)
        scales = up(n, 256) * up(up(-(-k // 32), 4), 2)
    else:
        values, scales = n * k // 2, n * -(-k // 32)
    return t.count * (values + scales + (n * bias_bytes if t.bias else 0))


def weights_from_config(a: ModelArch, *, with_vision: bool, tp: int = 1, int4: Int4Load = Int4Load(),
                        replicated: frozenset[Role] = frozenset(), mxfp4_backend: str = "triton") -> WeightBytes:
    """Weight bytes per rank computed from shapes and the quantization config; `int4`: what the GPU's 4-bit
    kernel and the vLLM version do at load (gpufacts.int4_load); `replicated`: the roles of linear tensors
    whole on every rank (replicated_on_ranks)."""
    scheme = replace(scheme_from_config(a.quantization), load=int4, mxfp4_backend=mxfp4_backend)
    db = dtype_bytes(a.dtype)
    total = {"model": 0, "mtp": 0, "vision": 0, "buffers": 0}
    tensors = list(model_tensors(a)) + list(buffer_tensors(a)) + list(mtp_tensors(a) if a.mtp_layers else []) + \
        list(a.vision.tensors() if with_vision and a.vision is not None else [])
    matrices: dict[str, list[tuple[str, int]]] = {"model": [], "mtp": [], "vision": [], "buffers": []}
    for t in tensors:
        if scheme.method == "mxfp4" and scheme.quantizes(t):
            total[t.part] += mxfp4_expert_bytes(t, scheme.mxfp4_backend, tp)  # per rank, padded per rank
            continue
        b = tensor_bytes(t, scheme, db)
        embedding = t.role is Role.EMBEDDING
        sharded = t.splits(replicated)
        total[t.part] += b // tp if sharded else b
        if t.linear or embedding:
            main = matrix_bytes(t, scheme, db)
            matrices[t.part].append((t.name, main // tp if sharded else main))
    if allocator_rounding_applies(scheme):
        for part, items in matrices.items():  # what torch's allocator keeps beside each large parameter
            total[part] += rounding_bytes(items)
    return WeightBytes(total["model"] + total["buffers"], total["mtp"], total["vision"], "config")


def allocator_rounding_applies(scheme: QuantScheme) -> bool:
    """Where the allocator's rest of segment (model/allocator.py) is planned: not for 4-bit group-quantized
    checkpoints, whose kernels repack into allocations of their own (not traced)."""
    return scheme.method not in INT4_LOAD_METHODS


def matrix_bytes(t: Tensor, scheme: QuantScheme, model_dtype_bytes: int) -> int:
    """The weight matrix alone (no scales, zero points or bias), as stored: packed where quantized."""
    if not scheme.quantizes(t):
        return t.numel * (t.dtype_bytes or model_dtype_bytes)
    return t.count * scheme.values_bytes(t.in_f * t.out_f)


def parameter_count(a: ModelArch) -> int:
    """Language-model parameters (no drafter, no vision), for display."""
    return sum(t.numel for t in model_tensors(a))
