"""Gemma 4's vision tower (vision_config model_type gemma4_vision) and its embedder, as vLLM 0.33.0 builds and
profiles it: transformers' Gemma4VisionModel with every Linear replicated (model_executor/models/gemma4_mm.py;
research note of 2026-11-27 on its source, the forward replayed on the CPU)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

from ..layers.base import Tensor
from .base import EncoderProfile, Tower, profile_items

VIDEO_FRAMES = 32  # gemma4_mm.py _VIDEO_MAX_FRAMES
FRAME_SOFT_TOKENS = 70  # gemma4_mm.py _VIDEO_MAX_SOFT_TOKENS: a frame's budget (and 2 + 6 tokens beside it)
FRAME_EXTRA_TOKENS = 8
CHUNK_TABLE_BYTES = 4 * 8  # the encode loop sizes its chunks by patches x 4 x position_embedding_size x 8 B
POSITION_ID_BYTES = 32  # a patch's pixel_position_ids on the GPU (int64, gemma4_mm.py)


@dataclass(frozen=True)
class Gemma4ViT(Tower):
    """config.json's vision_config: num_hidden_layers, hidden_size, intermediate_size, head_dim, patch_size,
    pooling_kernel_size, position_embedding_size, default_output_length (an image's soft tokens); the text hidden."""

    depth: int
    hidden: int
    intermediate: int
    head_dim: int
    patch: int
    pooling: int
    position_size: int
    image_tokens: int
    text_hidden: int
    name = "Gemma 4 ViT"
    profiled_modality = "video"
    modalities = ("image", "video")
    peak_text = "a chunk of frames x padded patches x (a block's MLP tensors + its attention mask row) + pixels"
    evidence = ("Gemma 4's vision tower: its weights and encoder peak (chunked by the card's memory) from vLLM "
                "0.33.0's source and transformers 5.17's, the forward replayed on the CPU; one 0.33.0 startup with it "
                "(26B-A4B on an H100: its weights as planned; the language model's peak decided, so the tower's own "
                "peak is not checked)")
    traced = True
    # its sliding layers clamp a bidirectional span to the window, so the prefix-LM backend's routing captures uniform
    # single-token decode batches in FULL graphs (v1/attention/backends/composite.py), where Gemma 3's captures none
    prefix_lm_cudagraph = "UNIFORM_SINGLE_TOKEN_DECODE"

    def tensors(self) -> Iterator[Tensor]:
        """The patch projection and the two position tables, `depth` blocks (q, k, v, o, no biases; q and k norms;
        four RMSNorms; a gated MLP), and the embedder to the text hidden: every one replicated over TP ranks."""
        h, i = self.hidden, self.intermediate
        r = dict(part="vision", replicated=True)
        yield Tensor("vision_tower.patch_embedder.input_proj", 3 * self.patch ** 2, h, **r)
        yield Tensor("vision_tower.patch_embedder.position_embedding_table", 2 * self.position_size, h, linear=False,
                     part="vision", tp_split=False)
        for n in range(self.depth):
            p = f"vision_tower.encoder.layers.{n}"
            yield Tensor(f"{p}.self_attn.qkvo", h, 4 * h, **r)
            yield Tensor(f"{p}.norms", 4 * h + 2 * self.head_dim, 1, linear=False, part="vision")
            yield Tensor(f"{p}.mlp.gate_up", h, 2 * i, **r)
            yield Tensor(f"{p}.mlp.down", i, h, **r)
        yield Tensor("embed_vision.embedding_projection", h, self.text_hidden, **r)

    def _grid(self, soft_tokens: int) -> tuple[int, int]:
        """(padded patches, real patches) of a dummy item of `soft_tokens`: the processor pads to soft tokens x
        pooling^2 and resizes the square dummy to the largest side of whole pooling cells within it (a 224-px
        frame at 70 tokens: 630 and 576 = 24 x 24; an image at 280: 2,520 and 2,304)."""
        padded = soft_tokens * self.pooling ** 2
        side = math.isqrt(padded) // self.pooling * self.pooling
        return padded, side * side

    def item_budget(self, off: frozenset[str] = frozenset()) -> int:
        """The tokens vLLM budgets for one profiled item: a video's 32 x (70 + 8), else an image's."""
        return VIDEO_FRAMES * (FRAME_SOFT_TOKENS + FRAME_EXTRA_TOKENS) if "video" not in off else self.image_tokens

    def profile(self, max_num_batched_tokens: int, max_model_len: int = 0,
                off: frozenset[str] = frozenset()) -> EncoderProfile:
        """Videos of 32 frames (each its own sequence of 630 padded patches, 64 embeddings) at 2,496 budgeted
        tokens a video: three at 8,192 batched tokens; with videos off, images of 2,520 padded patches and 256
        embeddings at 280 budgeted tokens. `patches` counts the padded patches the tower runs."""
        items = profile_items(max_num_batched_tokens, self.item_budget(off))
        if "video" not in off:
            padded, real = self._grid(FRAME_SOFT_TOKENS)
            return EncoderProfile(items, VIDEO_FRAMES * real // self.pooling ** 2, items * VIDEO_FRAMES * padded,
                                  modality="video")
        padded, real = self._grid(self.image_tokens)
        return EncoderProfile(items, real // self.pooling ** 2, items * padded)

    def profiles_without(self, off: frozenset[str]) -> bool:
        return not {"image", "video"} <= off

    def forward_bytes(self, p: EncoderProfile, tp: int) -> int:
        """The encode loop runs the batch in chunks of min(free / 2, card / 10) / (padded patches x 4 x
        position_embedding_size x 8 B) frames or images (the whole batch where the card is not known); the peak is a
        chunk's block MLP past the first (its input, residual and normed copy, gate, up and their product, the
        encoder's input embeddings: 2 x (4 x hidden + 3 x intermediate) a patch) beside its boolean attention mask
        row (a padded patch's count of bytes), the rope's cos / sin and the padding mask, plus the earlier chunks'
        outputs (2 x hidden a patch) and the whole batch's bf16 pixels and position ids. Images add their chunk's
        copy of the pixels. Replicated: TP does not split it. Gemma 4 26B-A4B at 8,192 tokens on an H200: 72 + 24
        frames, 1,725,993,360 B."""
        video = p.modality == "video"
        padded = self._grid(FRAME_SOFT_TOKENS if video else self.image_tokens)[0]
        units = p.patches // padded  # frames or images
        h, i = self.hidden, self.intermediate
        pixels_ids = 3 * self.patch ** 2 * 2 + POSITION_ID_BYTES  # bf16 pixels and their position ids, a patch
        whole = pixels_ids + (1 if video else 0)  # a video's padding positions too
        per_patch = 2 * (4 * h + 3 * i) + padded + 1 + 4 * self.head_dim + (0 if video else pixels_ids + 1)
        budget = min(p.free_bytes // 2, p.card_bytes // 10) if p.card_bytes else 0
        chunk = max(1, budget // (padded * CHUNK_TABLE_BYTES * self.position_size)) if budget else units
        peak, done = 0, 0
        while done < units:
            c = min(chunk, units - done)
            peak = max(peak, c * padded * per_patch + done * padded * 2 * h)
            done += c
        return peak + p.patches * whole

    @property
    def prefix_lm(self) -> bool:
        """Gemma 4 attends bidirectionally over an item's tokens on its sliding layers (a multimodal prefix LM)."""
        return True
