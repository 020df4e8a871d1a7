"""The Qwen3.5 / Qwen3-VL vision tower: a patch embedding, a learned position table, ViT blocks and a 2 x 2 patch
merger (Qwen3-VL: one more merger per deepstack level, and a buffer per level for the features those add)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from ..layers.base import Tensor
from .base import EncoderProfile, Tower, profile_items

# Qwen3.5 / Qwen3.6 image processor default (public preprocessor_config.json): longest edge 16,777,216 pixels,
# 16-pixel patches merged 2 x 2, so vLLM profiles the encoder with images of 65,536 patches (16,384 tokens)
MAX_IMAGE_PIXELS = 16_777_216


@dataclass(frozen=True)
class QwenViT(Tower):
    """config.json's vision_config (depth, hidden_size, ...). Its forward peak is the version's fitted encoder
    coefficients (vLLM 0.26.0 lab, Qwen3.5 0.8B and 9B)."""

    depth: int
    hidden: int
    intermediate: int
    out_hidden: int
    patch: int
    temporal_patch: int
    in_channels: int
    spatial_merge: int
    num_position_embeddings: int
    deepstack: int = 0  # Qwen3-VL's deepstack mergers (len(deepstack_visual_indexes)): a patch merger each
    name = "Qwen3.5 ViT"
    peak_text = "patches x (width + MLP width / TP)"
    evidence = ("vision encoder profiling peak (measured on Qwen3.5 0.8B and 9B towers, vLLM 0.20.2 and 0.26.0, an "
                "H100, and its split over TP ranks on the 27B's tower at TP 2, vLLM 0.26.0, two H200s; maximum image "
                "size assumed 16,777,216 pixels)")

    def tensors(self) -> Iterator[Tensor]:
        h = self.hidden
        yield Tensor("visual.patch_embed", self.in_channels * self.temporal_patch * self.patch * self.patch, h,
                     bias=True, linear=False, part="vision")
        yield Tensor("visual.pos_embed", self.num_position_embeddings, h, linear=False, part="vision")
        for i in range(self.depth):
            b = f"visual.blocks.{i}"
            yield Tensor(f"{b}.norms", 4 * h, 1, linear=False, part="vision")
            yield Tensor(f"{b}.attn.qkv", h, 3 * h, bias=True, part="vision")
            yield Tensor(f"{b}.attn.proj", h, h, bias=True, part="vision")
            yield Tensor(f"{b}.mlp.linear_fc1", h, self.intermediate, bias=True, part="vision")
            yield Tensor(f"{b}.mlp.linear_fc2", self.intermediate, h, bias=True, part="vision")
        merged = h * self.spatial_merge ** 2
        yield Tensor("visual.merger.norm", 2 * h, 1, linear=False, part="vision")
        yield Tensor("visual.merger.linear_fc1", merged, merged, bias=True, part="vision")
        yield Tensor("visual.merger.linear_fc2", merged, self.out_hidden, bias=True, part="vision")
        for i in range(self.deepstack):  # Qwen3-VL: one merger per deepstack level, its LayerNorm over the merged width
            yield Tensor(f"visual.deepstack_merger_list.{i}.norm", 2 * merged, 1, linear=False, part="vision")
            yield Tensor(f"visual.deepstack_merger_list.{i}.linear_fc1", merged, merged, bias=True, part="vision")
            yield Tensor(f"visual.deepstack_merger_list.{i}.linear_fc2", merged, self.out_hidden, bias=True,
                         part="vision")

    def profile(self, max_num_batched_tokens: int) -> EncoderProfile:
        """Maximum-size images of 65,536 patches (16,384 tokens): one while max_num_batched_tokens is below that."""
        patches = MAX_IMAGE_PIXELS // (self.patch * self.patch)
        tokens = patches // (self.spatial_merge ** 2)
        items = profile_items(max_num_batched_tokens, tokens)
        return EncoderProfile(items, tokens, items * patches)

    def held_bytes(self, p: EncoderProfile, text_hidden: int) -> int:
        """The images' pixel values (patches x channels x temporal patch x patch^2, bf16) and the encoder's outputs
        (tokens x the merger's output width, bf16). vLLM 0.20.2, Qwen3.5-0.8B + MTP 2 at 256 seqs: 1.94 GiB without
        the tower, 2.16 with it (0.19 + 0.03 GiB held)."""
        pixels = p.patches * self.in_channels * self.temporal_patch * self.patch * self.patch * 2
        return pixels + p.tokens * self.out_hidden * 2

    def buffer_bytes(self, max_num_batched_tokens: int, text_hidden: int, dtype_bytes: int) -> int:
        """Qwen3-VL keeps one max_num_batched_tokens x hidden buffer per deepstack level for the visual features it
        adds to the first layers (vLLM 0.33 qwen3_vl.py deepstack_input_embeds, allocated with the model)."""
        return self.deepstack * max_num_batched_tokens * text_hidden * dtype_bytes
