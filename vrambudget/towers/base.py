"""What a vision tower answers for the budget: its weights, what vLLM's encoder profiling runs through it, the peak
of that run, what stays alive while the language model's dummy run follows, and buffers it allocates with the model.

vLLM's profile_run (v1/worker/gpu_model_runner.py, 0.26-0.33) embeds a batch of maximum-size dummy items through the
tower in one call, then holds the outputs while the language model's own dummy run peaks: the larger of the tower's
forward peak and (the language model's peak + what is held) counts. Bytes per rank."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ..errors import UserError
from ..layers.base import Tensor


@dataclass(frozen=True)
class EncoderProfile:
    """The dummy batch vLLM's encoder profiling runs: `items` maximum-size items of `tokens_per_item` embeddings
    each (the encoder budget, max(max_num_batched_tokens, one item), over the item's tokens; at least one), and the
    `patches` the tower's blocks see."""

    items: int
    tokens_per_item: int
    patches: int
    modality: str = "image"
    # the card's total memory and what is free when the encoder runs (bytes; 0: not known), for a tower that sizes
    # its encode loop by them (Gemma 4)
    card_bytes: int = 0
    free_bytes: int = 0

    @property
    def tokens(self) -> int:
        return self.items * self.tokens_per_item


def vit_block(prefix: str, hidden: int, mlp_width: int, norm_values: int, names: tuple[str, ...],
              bias: bool = True) -> Iterator[Tensor]:
    """One pre-norm ViT block as vLLM builds it (part "vision"): its norms' values, the fused qkv and the output
    projection, and an MLP of `mlp_width` (a gated one's gate and up together) back to hidden, each linear with a
    bias unless `bias` is False; `names` = (norms, qkv, proj, MLP in, MLP out) as the tower's module names them."""
    norms, qkv, proj, mlp_in, mlp_out = (f"{prefix}.{n}" for n in names)
    yield Tensor(norms, norm_values, 1, linear=False, part="vision")
    yield Tensor(qkv, hidden, 3 * hidden, bias=bias, part="vision")
    yield Tensor(proj, hidden, hidden, bias=bias, part="vision")
    yield Tensor(mlp_in, hidden, mlp_width, bias=bias, part="vision")
    yield Tensor(mlp_out, mlp_width // (2 if mlp_in.endswith("gate_up_proj") else 1), hidden, bias=bias, part="vision")


QWEN_KWARGS = ("max_pixels", "min_pixels", "size", "fps", "num_frames")


def qwen_max_pixels(tower: Tower, kwargs: dict[str, Any], default: int) -> int:
    """A Qwen VL processor's max_pixels under --mm-processor-kwargs: max_pixels, else size's longest_edge, else
    `default` (vLLM 0.33 qwen2_vl.py _get_vision_size: max_pixels beats size); the other keys it knows do not size
    the profiled items (min_pixels is a floor; the dummies' frames come from max_model_len, not fps / num_frames)."""
    tower._unknown_kwargs(kwargs, QWEN_KWARGS)
    size = kwargs.get("size") or {}
    if not isinstance(size, dict):
        raise UserError("--mm-processor-kwargs: size must be an object, e.g. {\"longest_edge\": 1003520}")
    value = kwargs.get("max_pixels", size.get("longest_edge", default))
    unit = (tower.patch * tower.spatial_merge) ** 2
    if isinstance(value, bool) or not isinstance(value, int) or value < unit:
        raise UserError(f"--mm-processor-kwargs: max_pixels must be a whole number of pixels, at least {unit:,} (one "
                        f"merged patch), not {value!r}")
    return value


def profile_items(max_num_batched_tokens: int, tokens_per_item: int) -> int:
    """Items of the dummy batch: the encoder budget (max(max_num_batched_tokens, one item's tokens),
    v1/core/encoder_cache_manager.py) over one item's tokens (multimodal/encoder_budget.py; with vLLM's default
    limit of 999 items a prompt, max_num_seqs x the limit never binds)."""
    return max(1, max(max_num_batched_tokens, tokens_per_item) // tokens_per_item)


class Tower(ABC):
    """One vision tower kind."""

    name: str = ""
    peak_text: str = ""  # how its profiling peak is built, in words (the budget's 'from' column)
    evidence: str = ""  # what its figures rest on, for the answer's list of what is estimated
    traced: bool = False  # its peak traced in one vLLM's source (vllm_rules.traced_towers): refused elsewhere
    profiled_modality: str = "image"  # the item vLLM profiles it with at its defaults (the most tokens per item)
    modalities: tuple[str, ...] = ("image",)  # the items it embeds (all at 0 in --limit-mm-per-prompt: not loaded)
    # the coefficient that scales the language model's V2 CUDA-graph estimate while it is loaded ('' : measured as the
    # language model's alone)
    graph_factor: str = "cudagraph_v2_tower_embeds_factor"

    @abstractmethod
    def tensors(self) -> Iterator[Tensor]:
        """Its weights as vLLM allocates them (part "vision": never quantized)."""

    @abstractmethod
    def profile(self, max_num_batched_tokens: int, max_model_len: int = 0,
                off: frozenset[str] = frozenset()) -> EncoderProfile:
        """The dummy batch of vLLM's encoder profiling (max_model_len bounds a video's frames; 0: not bounding), without
        the modalities `off` (--limit-mm-per-prompt at 0: only where profiles_without says it is modelled)."""

    def with_processor_kwargs(self, kwargs: dict[str, Any]) -> Tower:
        """This tower as vLLM profiles it with --mm-processor-kwargs (the processor's settings that size the dummy
        items); a key it does not model is refused in one line."""
        if not kwargs:
            return self
        raise UserError(f"--mm-processor-kwargs: the {self.name} tower's profile with processor options is not "
                        "modelled (its profile is planned at the processor's defaults)")

    def _unknown_kwargs(self, kwargs: dict[str, Any], known: tuple[str, ...]) -> None:
        unknown = sorted(set(kwargs) - set(known))
        if unknown:
            raise UserError(f"--mm-processor-kwargs: {', '.join(unknown)} not modelled for the {self.name} tower "
                            f"(modelled: {', '.join(known)})")

    def item_budget(self, off: frozenset[str] = frozenset()) -> int:
        """The tokens vLLM's encoder budget counts for one profiled item (without the modalities `off`)."""
        return self.profile(0, 0, off).tokens_per_item

    def profiles_without(self, off: frozenset[str]) -> bool:
        """Whether its profile without the modalities `off` is modelled (its default item's is)."""
        return self.profiled_modality not in off

    def held_bytes(self, p: EncoderProfile, text_hidden: int) -> int:
        """Bytes alive from the encoder's run while the language model's dummy run peaks: the projected embeddings
        (tokens x text hidden, bf16), one output viewed per item; the pixels die with the encoder's call (Model Runner
        V2's mm/encoder_runner.py). A tower that keeps more says so."""
        return p.tokens * text_hidden * 2

    def allocations(self, tp: int, dtype_bytes: int = 2) -> Iterator[int]:
        """Its weights' allocations in the order vLLM builds them, bytes per rank: each tensor (the linears split over
        the ranks), then its bias."""
        for t in self.tensors():
            split = tp if t.splits() else 1
            for _ in range(t.count):
                yield t.in_f * t.out_f * (t.dtype_bytes or dtype_bytes) // split
                if t.bias:
                    yield t.out_f * (t.dtype_bytes or dtype_bytes) // split

    def forward_bytes(self, p: EncoderProfile, tp: int) -> int:
        """The tower's forward peak over the profile batch (bytes per rank), from vLLM's source; 0 where it is not
        traced and the version's fitted encoder coefficients stand for it."""
        return 0

    def buffer_bytes(self, max_num_batched_tokens: int, text_hidden: int, dtype_bytes: int) -> int:
        """Buffers the model allocates with the tower at load, beside the weights (0: none)."""
        return 0

    def kept_bytes(self, p: EncoderProfile) -> int:
        """What the encoder's profiling leaves allocated after it (bytes; 0: nothing)."""
        return 0

    # a prefix LM whose composite backend captures more than the version's rule says (vllm_rules.mm_prefix_backend):
    # its CUDA-graph support ('' : the rule's)
    prefix_lm_cudagraph: str = ""

    @property
    def prefix_lm(self) -> bool:
        """Whether the language model attends bidirectionally over an item's tokens once the tower is loaded (a
        multimodal prefix LM), which narrows vLLM's choice of attention backend (vllm_rules.mm_prefix_backend)."""
        return False
