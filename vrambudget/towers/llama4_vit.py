"""Llama 4's vision tower: a ViT over 336-pixel tiles (a class token each), a pixel-shuffle adapter and the projector
to the text model, as vLLM 0.33.0 builds and profiles it (model_executor/models/mllama4.py; research note of
2026-11-27 on its source, the forward replayed on the CPU)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from ..layers.base import Tensor
from .base import EncoderProfile, Tower, profile_items, vit_block

MAX_TILES = 16  # the image processor's max_patches (public preprocessor_config.json): 16 tiles + a global one


@dataclass(frozen=True)
class Llama4ViT(Tower):
    """config.json's vision_config: num_hidden_layers, hidden_size, intermediate_size, num_attention_heads,
    image_size (a tile), patch_size, pixel_shuffle_ratio, projector_input_dim / projector_output_dim, and
    vision_output_dim (the projector's input)."""

    depth: int
    hidden: int
    intermediate: int
    heads: int
    tile: int
    patch: int
    shuffle_ratio: float
    adapter_in: int
    adapter_out: int
    vision_out: int
    text_hidden: int
    in_channels: int = 3
    name = "Llama 4 ViT"
    peak_text = "tiles x (577 tokens x a block's MLP tensors + bf16 pixels)"
    evidence = ("Llama 4's ViT: its weights from vLLM 0.33.0's source; its encoder peak traced there and checked on "
                "two 0.33.0 startups (Scout cut to 4 layers on an H100: the language model's peak at 8,192 tokens, "
                "the tower's at 32,768, 0.15 GiB above the log)")
    traced = True

    @property
    def tokens_per_tile(self) -> int:
        """A tile's patches plus its class token (577 at 336 / 14)."""
        return (self.tile // self.patch) ** 2 + 1

    @property
    def embeds_per_tile(self) -> int:
        """A tile's embeddings after the pixel shuffle (144 at 336 / 14 and a ratio of 0.5)."""
        return (self.tile // self.patch) ** 2 // round(1 / self.shuffle_ratio ** 2)

    def tensors(self) -> Iterator[Tensor]:
        """The patch linear (no bias), the class token and position table, two LayerNorms, `depth` blocks (two
        LayerNorms, qkv / o_proj / fc1 / fc2 with biases); the adapter's two linears and the projector (no biases:
        multi_modal_projector_bias false in the public configs)."""
        h = self.hidden
        yield Tensor("vision_model.patch_embedding.linear", self.in_channels * self.patch ** 2, h, part="vision")
        yield Tensor("vision_model.class_embedding", h, 1, linear=False, part="vision")
        yield Tensor("vision_model.positional_embedding_vlm", self.tokens_per_tile, h, linear=False, part="vision")
        yield Tensor("vision_model.layernorm_pre_post", 4 * h, 1, linear=False, part="vision")
        for n in range(self.depth):
            yield from vit_block(f"vision_model.model.layers.{n}", h, self.intermediate, 4 * h,
                                 ("layernorms", "self_attn.qkv_proj", "self_attn.o_proj", "mlp.fc1", "mlp.fc2"))
        shuffled = int(h / self.shuffle_ratio ** 2)
        yield Tensor("vision_model.vision_adapter.mlp.fc1", shuffled, self.adapter_in, part="vision")
        yield Tensor("vision_model.vision_adapter.mlp.fc2", self.adapter_in, self.adapter_out, part="vision")
        yield Tensor("multi_modal_projector.linear_1", self.vision_out, self.text_hidden, part="vision")

    def profile(self, max_num_batched_tokens: int, max_model_len: int = 0,
                off: frozenset[str] = frozenset()) -> EncoderProfile:
        """vLLM's dummy image, 336 wide and 16 tiles high, splits into 16 tiles and a global one: 17 x 144 = 2,448
        embeddings an image (transformers 5.17's Llama4ImageProcessor gave pixel_values (17, 3, 336, 336)); at
        8,192 batched tokens three images, 51 tiles of 577 tokens. `patches` counts the tiles' tokens."""
        tiles = MAX_TILES + 1
        tokens = tiles * self.embeds_per_tile
        items = profile_items(max_num_batched_tokens, tokens)
        return EncoderProfile(items, tokens, items * tiles * self.tokens_per_tile)

    def forward_bytes(self, p: EncoderProfile, tp: int) -> int:
        """A block's MLP past the first: the encoder's input, the block's input and its residual, the normed copy,
        fc1 and the GELU's output (per rank): 2 x (4 x hidden + 2 x intermediate / TP) a token, beside the pixels
        (normalized on the CPU in bf16: Llama 4 does not normalize on the GPU). The source's 2D rope, replayed on
        the CPU, peaks higher (fp32 and complex copies of q and k: 45,056 B a token at TP 1), but a 0.33.0 startup
        rules that out: 221 tiles logged 4.00 GiB where the rope would be 5.49 and this 4.15 (an estimate,
        lab-vllm-0.33.0-h100/vision/l4v-t32k). At TP > 1 the RowParallel layers' all-reduce outputs beside their
        inputs can be higher (from the source, not measured)."""
        h, i = self.hidden, self.intermediate
        per_token = 2 * (4 * h + 2 * i // tp)
        if tp > 1:
            per_token = max(per_token, 2 * (6 * h + i // tp), 2 * (5 * h + 6 * h // tp))
        tiles = p.patches // self.tokens_per_tile
        return p.patches * per_token + tiles * self.in_channels * self.tile ** 2 * 2
