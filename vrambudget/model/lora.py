"""The buffers vLLM allocates for LoRA adapters when it loads a model with --enable-lora.

vLLM wraps every linear layer (and, for some model classes, the embedding and the LM head) in a LoRA layer that holds
`max_loras` slots of zero-filled A and B matrices of rank `max_lora_rank` in the model dtype, allocated on the GPU as
the model loads, so vLLM's 'Model loading took' counts them (v1/worker/gpu/model_runner.py load_model). Shapes read in
the 0.22.1 wheel (lora/layers/base_linear.py, column_parallel_linear.py, row_parallel_linear.py,
vocal_parallel_embedding.py, logits_processor.py; the same in 0.17.1 and 0.26.0): per slice of a column-parallel layer
A is rank x the whole input and B is the rank's output shard x rank; a row-parallel layer's A is rank x its input
shard and B the whole output x rank (fully sharded LoRAs split rank resp. output across the ranks instead). The
warm-up's dummy adapters are built on the CPU (lora/model_manager.py create_dummy_lora), so the profile adds only the
kernels' small per-token buffers. Pure arithmetic; bytes per rank.
"""

from __future__ import annotations

from dataclasses import dataclass

from .arch import ModelArch

# model types whose vLLM class lists embed_tokens and lm_head in `embedding_modules`, so both get LoRA slots too
# (0.17.1, 0.19.0, 0.22.1 and 0.26.0: qwen3.py, llama.py, and phi3.py, whose Phi3ForCausalLM subclasses Llama's and
# inherits them; qwen2.py lists none and mistral.py sets them empty)
EMBEDDING_LORA_MODEL_TYPES = frozenset({"qwen3", "llama", "phi3"})


@dataclass(frozen=True)
class LoraSlots:
    """vLLM's LoRA flags: --max-loras, --max-lora-rank, --fully-sharded-loras (defaults as in config/lora.py)."""

    max_loras: int = 1
    max_rank: int = 16
    fully_sharded: bool = False


def not_modelled(a: ModelArch) -> str | None:
    """Why the LoRA buffers of this model are not computed here (None: they are)."""
    if a.moe is not None:
        return "LoRA on a mixture-of-experts model (per-expert slots) is not modelled"
    if a.is_hybrid:
        return "LoRA on a GatedDeltaNet hybrid is not modelled"
    if a.is_multimodal:
        return "LoRA on a multimodal model's tower is not modelled"
    if a.two_attention_shapes:
        return "LoRA on attention layers of two shapes (or a gated attention output) is not modelled"
    return None


def lora_buffer_bytes(a: ModelArch, slots: LoraSlots, tp: int, dtype_bytes: int) -> int:
    """Bytes per tensor-parallel rank of the LoRA slots vLLM allocates at load for a dense decoder (attention
    q/k/v and o, the gated MLP's gate/up and down, and the embeddings where the model class adds them)."""
    r = slots.max_rank
    r_col = r // tp if slots.fully_sharded else r  # A rows of a column-parallel slice
    q = a.num_attention_heads * a.head_dim
    kv = max(a.num_kv_heads // tp, 1) * a.head_dim  # KV heads below TP are replicated, one per rank
    h, inter = a.hidden_size, a.dense_mlp.intermediate if a.dense_mlp else 0

    def column(in_full: int, outs: list[int]) -> int:  # one A per slice over the whole input, B over the shard
        return len(outs) * r_col * in_full + sum(outs) * r

    def row(in_full: int, out_full: int) -> int:  # A over the input shard, B over the whole (or sharded) output
        return r * (in_full // tp) + (out_full // tp if slots.fully_sharded else out_full) * r

    per_layer = (column(h, [q // tp, kv, kv]) + row(q, h)
                 + column(h, [inter // tp, inter // tp]) + row(inter, h))
    elements = a.num_layers * per_layer
    if a.model_type in EMBEDDING_LORA_MODEL_TYPES:
        elements += (a.vocab_size + h) * r  # embed_tokens: A vocab x rank, B hidden x rank
        elements += (h + a.vocab_size) * r  # lm_head: A rank x hidden, B vocab x rank (the whole vocabulary)
    return slots.max_loras * elements * dtype_bytes
