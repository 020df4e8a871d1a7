"""Mistral Small 3.x's Pixtral tower (Hugging Face format: Mistral3ForConditionalGeneration, vision_config model_type
pixtral) with its patch merger and projector, as vLLM 0.33.0 builds and profiles it (model_executor/models/
pixtral.py, mistral3.py; research note of 2026-11-27 on its source)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from ..layers.base import Tensor
from .base import EncoderProfile, Tower, profile_items, vit_block


@dataclass(frozen=True)
class Pixtral(Tower):
    """config.json's vision_config (num_hidden_layers, hidden_size, intermediate_size, num_attention_heads, head_dim,
    patch_size, image_size: the processor's longest edge), the top-level spatial_merge_size and the text hidden.
    `layers`: the blocks vLLM builds, up to vision_feature_layer (-1: all)."""

    layers: int
    hidden: int
    intermediate: int
    head_dim: int
    patch: int
    image_size: int
    merge: int
    text_hidden: int
    in_channels: int = 3
    name = "Pixtral ViT"
    peak_text = "patches x (a block's MLP tensors + the patch embeddings and ln_pre output kept + uint8 pixels + rope)"
    evidence = ("Mistral Small 3.x's Pixtral tower, planned in the Hugging Face format (config.json): its weights and "
                "encoder peak from vLLM 0.33.0's source, three 0.33.0 startups with it (its weights; its own peak "
                "deciding in one, eager at 1,024 batched tokens: 0.43 GiB logged, 0.45 planned); a repository that also ships params.json is loaded by `vllm serve` in Mistral's "
                "own format unless --config-format hf is given, whose tower code is not traced")
    traced = True
    # measured: with the tower vLLM 0.33.0's graph estimate is the language model's alone (Mistral Small 3.1: 1.04 GiB
    # with it on an H100, lab-vllm-0.33.0-h100/vision/m3-vis, and 1.04 without on an H200, h200/vision/m3-lmo)
    graph_factor = ""

    @property
    def patches_per_image(self) -> int:
        return (-(-self.image_size // self.patch)) ** 2

    @property
    def tokens_per_image(self) -> int:
        """[IMG] embeddings of vLLM's square dummy image: ceil(side / (patch x merge)) squared (3,025 at 1,540 px);
        the row breaks and the end token are not embeddings."""
        return (-(-self.image_size // (self.patch * self.merge))) ** 2

    def tensors(self) -> Iterator[Tensor]:
        """The patch convolution and ln_pre, `layers` blocks (two RMSNorms, qkv, o_proj and a SiLU-gated MLP, no
        biases), and the projector: its RMSNorm, the patch merger (merge^2 x hidden -> hidden) and two linears to
        the text hidden (multimodal_projector_bias false)."""
        h, i = self.hidden, self.intermediate
        yield Tensor("vision_tower.patch_conv", self.in_channels * self.patch ** 2, h, linear=False, part="vision")
        yield Tensor("vision_tower.ln_pre", h, 1, linear=False, part="vision")
        for n in range(self.layers):
            yield from vit_block(f"vision_tower.transformer.layers.{n}", h, 2 * i, 2 * h,
                                 ("norms", "attention.qkv_proj", "attention.o_proj", "feed_forward.gate_up_proj",
                                  "feed_forward.down_proj"), bias=False)
        yield Tensor("multi_modal_projector.norm", h, 1, linear=False, part="vision")
        yield Tensor("multi_modal_projector.patch_merger.merging_layer", h * self.merge ** 2, h, part="vision")
        yield Tensor("multi_modal_projector.linear_1", h, self.text_hidden, part="vision")
        yield Tensor("multi_modal_projector.linear_2", self.text_hidden, self.text_hidden, part="vision")

    def profile(self, max_num_batched_tokens: int, max_model_len: int = 0,
                off: frozenset[str] = frozenset()) -> EncoderProfile:
        """Square dummy images of the processor's longest edge (vision_config.image_size): at 1,540 px 12,100
        patches and 3,025 embeddings each, two at 8,192 batched tokens (transformers 5.17's PixtralImageProcessor:
        pixel_values (1, 3, 1540, 1540), 3,025 [IMG])."""
        items = profile_items(max_num_batched_tokens, self.tokens_per_image)
        return EncoderProfile(items, self.tokens_per_image, items * self.patches_per_image)

    def forward_bytes(self, p: EncoderProfile, tp: int) -> int:
        """A block's MLP past the first: its input, the attention's output, the residual, the normed copy and
        down_proj's output, gate_up and the SiLU's output per rank, (5 x hidden + 3 x intermediate / TP) x 2 B a
        patch, beside the patch embeddings and ln_pre's output (2 x hidden x 2 B, kept through the loop), the uint8
        pixels (vLLM normalizes them on the GPU), the rope's cos / sin and the int64 position ids. Flash attention
        runs per image: no patches x patches mask on 0.33 (0.26's SDPA path built one)."""
        h, i = self.hidden, self.intermediate
        per_patch = 2 * (7 * h + 3 * i // tp) + self.in_channels * self.patch ** 2 + 4 * self.head_dim + 16
        return p.patches * per_patch
