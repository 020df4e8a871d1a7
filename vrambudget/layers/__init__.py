"""One module per layer kind, the way vLLM's `v1/kv_cache_interface.py` and llama.cpp's `llama-memory-*` are
organised: each kind holds its own shape (read by a model family from config.json), lists the tensors vLLM
allocates for it, answers its KV or state spec per tensor-parallel rank and checks how it splits over ranks. The
planner (kv/planner.py) and the weights (model/weights.py) loop over a model's layers and name no kind.

| module | kind | cache |
|---|---|---|
| attention.py | full attention (GQA/MHA; output gate, qk-norm, biases, sinks) | K and V of every token |
| sliding.py | sliding-window attention | K and V of the last window (+ the tokens in flight) |
| chunked.py | chunked local attention (Llama 4) | K and V of the current chunk |
| mla.py | multi-head latent attention (DeepSeek V2/V3, Kimi K2) | one latent (+ rope key) per token, whole on every rank |
| gdn.py | GatedDeltaNet linear attention (Qwen3.5/3.6, Qwen3-Next) | a fixed conv + recurrent state per sequence |
| mamba2.py | Mamba2 SSM (Nemotron-H, Granite 4.0-H, Falcon-H1) | a fixed conv + SSM state per sequence |
| ffn.py | the feed-forward block: dense MLP or mixture of experts | none |
"""

from .base import CacheContext, DecoderLayer, LayerKind, Tensor

__all__ = ["CacheContext", "DecoderLayer", "LayerKind", "Tensor"]
