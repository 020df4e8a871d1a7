"""Gemma 3's SigLIP tower (vision_config model_type siglip_vision_model) and its projector, as vLLM builds them
(model_executor/models/siglip.py, gemma3_mm.py; 0.33.0)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

from ..errors import UserError
from ..layers.base import Tensor
from .base import EncoderProfile, Tower, profile_items, vit_block


@dataclass(frozen=True)
class Siglip(Tower):
    """A SigLIP ViT over square images of `image_size` pixels in `patch`-pixel patches, average-pooled to
    `tokens_per_image` embeddings (mm_tokens_per_image), projected to the language model's width. It holds its
    projected embeddings through the language model's run (Tower.held_bytes; vLLM 0.33.0 on an H100: Gemma 3 4B's
    peak 3.59 GiB with the tower, 3.55 without, 32 x 256 x 2,560 x 2 B = 0.04; 27B's 3.68 and 3.60, 0.08)."""

    depth: int
    hidden: int
    intermediate: int
    image_size: int
    patch: int
    text_hidden: int
    tokens_per_image: int
    in_channels: int = 3
    crops: int = 0  # pan and scan's crops of the dummy image beside it (--mm-processor-kwargs; off by default)
    name = "SigLIP"
    traced = True
    peak_text = "patches x (4 x width + 2 x MLP width / TP) x 2 B + pixels"
    evidence = ("Gemma 3's SigLIP tower: its weights, encoder peak and the encoder runner's buffer from vLLM 0.33.0's "
                "source, checked on three 0.33.0 startups with it (available KV -0.01 to +0.11 GiB; the 27B's +0.11 is "
                "its text model's weights, -0.09 without the tower too)")

    @property
    def patches_per_image(self) -> int:
        return (self.image_size // self.patch) ** 2

    def tensors(self) -> Iterator[Tensor]:
        """Patch convolution (with bias), position table, `depth` pre-norm blocks (two LayerNorms with bias, fused
        qkv and out projections with bias, a GELU MLP with bias), the post LayerNorm; the projector's RMSNorm and
        its hidden x text-hidden matrix."""
        h, i = self.hidden, self.intermediate
        yield Tensor("vision_tower.embeddings.patch_embedding", self.in_channels * self.patch ** 2, h, bias=True,
                     linear=False, part="vision")
        yield Tensor("vision_tower.embeddings.position_embedding", self.patches_per_image, h, linear=False,
                     part="vision")
        for n in range(self.depth):
            yield from vit_block(f"vision_tower.encoder.layers.{n}", h, i, 4 * h,
                                 ("layer_norms", "self_attn.qkv_proj", "self_attn.out_proj", "mlp.fc1", "mlp.fc2"))
        yield Tensor("vision_tower.post_layernorm", 2 * h, 1, linear=False, part="vision")
        yield Tensor("multi_modal_projector.mm_soft_emb_norm", h, 1, linear=False, part="vision")
        yield Tensor("multi_modal_projector.mm_input_projection_weight", h, self.text_hidden, linear=False,
                     part="vision")

    def with_processor_kwargs(self, kwargs: dict[str, Any]) -> Siglip:
        """do_pan_and_scan (and pan_and_scan_max_num_crops, 4 by default): vLLM's dummy image is image_size wide
        and max_num_crops times as tall, which pan and scan cuts into that many crops beside the whole image
        (gemma3_mm.py get_num_crops; transformers 5.17 gave pixel_values (5, 3, 896, 896)); fewer than 2: none."""
        self._unknown_kwargs(kwargs, ("do_pan_and_scan", "pan_and_scan_max_num_crops"))
        on, most = kwargs.get("do_pan_and_scan", False), kwargs.get("pan_and_scan_max_num_crops", 4)
        if not isinstance(on, bool) or isinstance(most, bool) or not isinstance(most, int) or most < 0:
            raise UserError("--mm-processor-kwargs: do_pan_and_scan is true or false and pan_and_scan_max_num_crops "
                            f"a whole number, not {on!r} / {most!r}")
        return replace(self, crops=most if on and most >= 2 else 0)

    def profile(self, max_num_batched_tokens: int, max_model_len: int = 0,
                off: frozenset[str] = frozenset()) -> EncoderProfile:
        """Images of `tokens_per_image` tokens each of the full patch grid (pan and scan off, vLLM's default: at
        8,192 batched tokens 32 images of 4,096 patches); with pan and scan, each crop and the whole image: (crops +
        1) x both (4 crops: 1,280 tokens, 6 images at 8,192)."""
        views = self.crops + 1
        items = profile_items(max_num_batched_tokens, views * self.tokens_per_image)
        return EncoderProfile(items, views * self.tokens_per_image, items * views * self.patches_per_image)

    def forward_bytes(self, p: EncoderProfile, tp: int) -> int:
        """The MLP of a block past the first: the encoder's input embeddings (kept in its hidden-states list), the
        block's input (the caller's), the residual after attention, the second LayerNorm's output, and fc1's output
        beside the GELU's (hidden split over the ranks): (4 x hidden + 2 x intermediate / tp) a patch, bf16; beside
        it the batch's pixel values (bf16). vLLM 0.33.0 on an H200, Gemma 3 4B at 16,384 batched tokens (64 images,
        262,144 patches): 6.45 + 0.29 GiB; logged 6.74 (lab-vllm-0.33.0-h200/vision/g3-4b-t16k)."""
        per_patch = (4 * self.hidden + 2 * self.intermediate // tp) * 2
        pixels = p.patches // self.patches_per_image * self.in_channels * self.image_size ** 2 * 2
        return p.patches * per_patch + pixels

    @property
    def prefix_lm(self) -> bool:
        """Gemma 3 attends bidirectionally over an image's tokens (a multimodal prefix LM): the language model's
        attention backend must support that, which changes vLLM's pick (vllm_rules.mm_prefix_backend)."""
        return True
