"""Qwen2.5-VL's window-attention ViT and patch merger, as vLLM 0.33.0 builds and profiles it
(model_executor/models/qwen2_5_vl.py, qwen2_vl.py's dummy inputs)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

from ..layers.base import Tensor
from .base import EncoderProfile, Tower, profile_items, qwen_max_pixels, vit_block

MAX_PIXELS = 12_845_056  # the image processor's max_pixels (public preprocessor_config.json)
VIDEO_MAX_FRAMES = 14  # _MAX_FRAMES_PER_VIDEO


@dataclass(frozen=True)
class Qwen25ViT(Tower):
    """config.json's vision_config: depth, hidden_size, intermediate_size (SwiGLU), num_heads, out_hidden_size, patch,
    temporal patch and spatial merge sizes."""

    depth: int
    hidden: int
    intermediate: int
    heads: int
    out_hidden: int
    patch: int = 14
    temporal_patch: int = 2
    spatial_merge: int = 2
    in_channels: int = 3
    max_pixels: int = MAX_PIXELS  # the processor's (--mm-processor-kwargs max_pixels)
    name = "Qwen2.5-VL ViT"
    profiled_modality = "video"
    modalities = ("image", "video")
    peak_text = "patches x (the MLP's tensors + pixels + rope caches)"
    evidence = ("Qwen2.5-VL's ViT: its weights and encoder peak from vLLM 0.33.0's source, checked on two 0.33.0 "
                "startups with it (Qwen2.5-VL-7B profiled with a 14-frame video, 14.88 GiB, and with one image)")
    traced = True

    def tensors(self) -> Iterator[Tensor]:
        """The patch embedding (no bias), `depth` blocks (two RMSNorms, qkv and proj with bias, a SwiGLU MLP with
        bias) and the merger (an RMSNorm, then 4 x hidden -> 4 x hidden -> out_hidden with bias)."""
        h, i = self.hidden, self.intermediate
        yield Tensor("visual.patch_embed", self.in_channels * self.temporal_patch * self.patch ** 2, h, linear=False,
                     part="vision")
        for n in range(self.depth):
            yield from vit_block(f"visual.blocks.{n}", h, 2 * i, 2 * h,
                                 ("norms", "attn.qkv", "attn.proj", "mlp.gate_up_proj", "mlp.down_proj"))
        merged = h * self.spatial_merge ** 2
        yield Tensor("visual.merger.ln_q", h, 1, linear=False, part="vision")
        yield Tensor("visual.merger.mlp.0", merged, merged, bias=True, part="vision")
        yield Tensor("visual.merger.mlp.2", merged, self.out_hidden, bias=True, part="vision")

    @property
    def image_tokens(self) -> int:
        """The dummy image's tokens: max_pixels over a merged patch's pixels (16,384 at 12,845,056: 3,584^2 px)."""
        return self.max_pixels // (self.patch * self.spatial_merge) ** 2

    def with_processor_kwargs(self, kwargs: dict[str, Any]) -> Qwen25ViT:
        """max_pixels (or size's longest_edge) sizes the dummy image and the video's frames (vLLM 0.33 qwen2_vl.py
        _get_vision_size); min_pixels, fps and num_frames do not change the profiled items."""
        return replace(self, max_pixels=qwen_max_pixels(self, kwargs, self.max_pixels))

    def profile(self, max_num_batched_tokens: int, max_model_len: int = 0,
                off: frozenset[str] = frozenset()) -> EncoderProfile:
        """A video of the most frames whose tokens fit max_model_len (pairs of frames of 16,384 tokens, at most 14
        frames: 114,688 tokens at 128,000), which outweighs the 16,384-token image where it has two frames or more;
        with videos off (--limit-mm-per-prompt '{"video": 0}') the image (Qwen2.5-VL-7B: 2.21 GiB of peak where the
        video gave 14.88, lab-vllm-0.33.0-h200/vision/q25vl-7b-img)."""
        pairs = 1 if "video" in off else min(VIDEO_MAX_FRAMES // self.temporal_patch,
                                              (max_model_len or 2**31) // self.image_tokens)
        tokens = max(pairs, 1) * self.image_tokens
        items = profile_items(max_num_batched_tokens, tokens)
        return EncoderProfile(items, tokens, items * tokens * self.spatial_merge ** 2)

    def profiles_without(self, off: frozenset[str]) -> bool:
        return "image" not in off

    def forward_bytes(self, p: EncoderProfile, tp: int) -> int:
        """A block's MLP: its input, the attention's output, the fused norm's output and residual, gate_up, the
        activation and down_proj's output (bf16, the MLP split over the ranks), beside the pixels (uint8: vLLM
        normalizes them on the GPU), the rope's cos / sin twice (the cache and the forward's copy) and the window
        indices. Qwen2.5-VL-7B with a 14-frame video (458,752 patches): 34,820 B a patch, 14.88 GiB logged
        (lab-vllm-0.33.0-h100/vision/q25vl-7b-vis)."""
        h, i = self.hidden, self.intermediate
        pixels = self.in_channels * self.temporal_patch * self.patch ** 2
        return p.patches * (2 * (5 * h + 3 * i // tp) + pixels + 4 * (h // self.heads) + 4)

    def held_bytes(self, p: EncoderProfile, text_hidden: int) -> int:
        """The embeddings (tokens x out_hidden, bf16) and the rope cache the tower keeps (2 x head dim a patch)."""
        return p.tokens * self.out_hidden * 2 + self.kept_bytes(p)

    def kept_bytes(self, p: EncoderProfile) -> int:
        """The rope's cos / sin cache of the profiled grid, never freed (qwen2_5_vl.py _rope_by_thw_cache)."""
        return p.patches * 2 * (self.hidden // self.heads)
