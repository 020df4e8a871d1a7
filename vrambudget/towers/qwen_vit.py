"""The Qwen3.5 / Qwen3-VL vision tower: a patch embedding, a learned position table, ViT blocks and a 2 x 2 patch
merger (Qwen3-VL: one more merger per deepstack level, and a buffer per level for the features those add)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

from ..layers.base import Tensor
from .base import EncoderProfile, Tower, profile_items, qwen_max_pixels, vit_block

# Qwen3.5 / Qwen3.6 image processor default (public preprocessor_config.json): longest edge 16,777,216 pixels,
# 16-pixel patches merged 2 x 2, so vLLM profiles the encoder with images of 65,536 patches (16,384 tokens)
MAX_IMAGE_PIXELS = 16_777_216
# Qwen3-VL's video processor default (public preprocessor / video_preprocessor config): longest edge 25,165,824
# pixels over a video's frames; vLLM's dummy video has two frames (one temporal patch), each of half that
MAX_VIDEO_PIXELS = 25_165_824


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
    image_max_pixels: int = MAX_IMAGE_PIXELS  # the processors' longest edges (--mm-processor-kwargs max_pixels)
    video_max_pixels: int = MAX_VIDEO_PIXELS
    name = "Qwen3.5 ViT"
    modalities = ("image", "video")
    peak_text = "patches x (width + MLP width / TP)"
    evidence = ("vision encoder profiling peak (measured on Qwen3.5 0.8B and 9B towers, vLLM 0.20.2 and 0.26.0, an "
                "H100, and its split over TP ranks on the 27B's tower at TP 2, vLLM 0.26.0, two H200s; maximum image "
                "size assumed 16,777,216 pixels)")

    def tensors(self) -> Iterator[Tensor]:
        """In vLLM's build order: the patch embedding, the position table, the mergers, then the blocks."""
        h = self.hidden
        yield Tensor("visual.patch_embed", self.in_channels * self.temporal_patch * self.patch * self.patch, h,
                     bias=True, linear=False, part="vision")
        yield Tensor("visual.pos_embed", self.num_position_embeddings, h, linear=False, part="vision")
        merged = h * self.spatial_merge ** 2
        yield Tensor("visual.merger.norm", 2 * h, 1, linear=False, part="vision")
        yield Tensor("visual.merger.linear_fc1", merged, merged, bias=True, part="vision")
        yield Tensor("visual.merger.linear_fc2", merged, self.out_hidden, bias=True, part="vision")
        for i in range(self.deepstack):  # Qwen3-VL: one merger per deepstack level, its LayerNorm over the merged width
            yield Tensor(f"visual.deepstack_merger_list.{i}.norm", 2 * merged, 1, linear=False, part="vision")
            yield Tensor(f"visual.deepstack_merger_list.{i}.linear_fc1", merged, merged, bias=True, part="vision")
            yield Tensor(f"visual.deepstack_merger_list.{i}.linear_fc2", merged, self.out_hidden, bias=True,
                         part="vision")
        for i in range(self.depth):  # built after the mergers (vLLM 0.33 qwen3_vl.py Qwen3_VisionTransformer)
            yield from vit_block(f"visual.blocks.{i}", h, self.intermediate, 4 * h,
                                 ("norms", "attn.qkv", "attn.proj", "mlp.linear_fc1", "mlp.linear_fc2"))

    def profile(self, max_num_batched_tokens: int, max_model_len: int = 0,
                off: frozenset[str] = frozenset()) -> EncoderProfile:
        """Maximum-size images of 65,536 patches (16,384 tokens): one while max_num_batched_tokens is below that."""
        patches = self.image_max_pixels // (self.patch * self.spatial_merge) ** 2 * self.spatial_merge ** 2
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


@dataclass(frozen=True)
class Qwen3VLViT(QwenViT):
    """Qwen3-VL's ViT: Qwen3.5's with deepstack mergers; its forward peak traced in vLLM 0.33.0's source
    (model_executor/models/qwen3_vl.py) where the Qwen3.5 ViT's is fitted."""

    heads: int = 16
    name = "Qwen3-VL ViT"
    peak_text = "patches x (attention's or MLP's tensors + position table + pixels + deepstack features)"
    evidence = ("Qwen3-VL's ViT: its weights and encoder peak from vLLM 0.33.0's source, checked on two 0.33.0 "
                "startups with it (Qwen3-VL-8B, one and two profiling images: the language model's peak and the tower's)")
    traced = True

    def with_processor_kwargs(self, kwargs: dict[str, Any]) -> Qwen3VLViT:
        """max_pixels (or size's longest_edge) is both processors' longest edge: the image's and the whole
        two-frame dummy video's (vLLM 0.33 qwen3_vl.py adds it to the video kwargs); the other keys do not size the
        profiled items."""
        if not kwargs:
            return self
        p = qwen_max_pixels(self, kwargs, self.image_max_pixels)
        return replace(self, image_max_pixels=p, video_max_pixels=p)

    def profiles_without(self, off: frozenset[str]) -> bool:
        """With images off vLLM profiles its dummy video, which is modelled (profile); with both off nothing."""
        return "video" not in off

    def profile(self, max_num_batched_tokens: int, max_model_len: int = 0,
                off: frozenset[str] = frozenset()) -> EncoderProfile:
        """The 16,384-token image (QwenViT.profile); with images off (--limit-mm-per-prompt '{"image": 0}') vLLM's
        dummy video: two frames of half the video processor's pixels (3,072 x 4,096), one temporal patch, so
        12,288 tokens and 49,152 patches a video, its pixels uint8 and its outputs with their deepstack features as
        an image's (vLLM 0.33.0 qwen3_vl.py _get_dummy_videos, get_max_video_tokens)."""
        if "image" not in off:
            return super().profile(max_num_batched_tokens, max_model_len, off)
        tokens = self.video_max_pixels // self.temporal_patch // (self.patch * self.spatial_merge) ** 2
        items = profile_items(max_num_batched_tokens, tokens)
        return EncoderProfile(items, tokens, items * tokens * self.spatial_merge ** 2)

    def forward_bytes(self, p: EncoderProfile, tp: int) -> int:
        """The attention's or the MLP's tensors of a block (the larger: the block's input, its normed copy and
        output, qkv, the contiguous and rotated q / k and the output, or fc1 and the GELU), beside the position
        table the forward keeps, the pixels (uint8: vLLM normalizes them on the GPU), the rope's cos / sin and the
        deepstack features already made (a quarter of a patch's out_hidden each); bf16. Qwen3-VL-8B at 32,768
        batched tokens (two images, 131,072 patches): 4.33 GiB logged (lab-vllm-0.33.0-h200/vision/q3vl-8b-t32k)."""
        h, i = self.hidden, self.intermediate
        block = max(2 * (3 * h + 8 * h // tp), 2 * (3 * h + 2 * i // tp))
        pixels = self.in_channels * self.temporal_patch * self.patch ** 2
        deepstack = self.deepstack * 2 * self.out_hidden // self.spatial_merge ** 2
        return p.patches * (block + 2 * h + pixels + 2 * (h // self.heads) + deepstack)

    def held_bytes(self, p: EncoderProfile, text_hidden: int) -> int:
        """The embeddings with their deepstack features, (1 + levels) x out_hidden a token, bf16; the pixels are
        freed with the encoder's call (mm/encoder_runner.py)."""
        return p.tokens * (1 + self.deepstack) * self.out_hidden * 2
