"""CUDA graphs: the batch sizes vLLM captures, its graph mode on this backend, and its estimate of their memory
(Model Runner V1's from the 0.20.2 / 0.26.0 lab, V2's from the 0.33.0 lab), per rank."""

from __future__ import annotations

from .coefficients import Coefficients
from .deployment import Deployment
from .features import Features
from .hardware.facts import Backend
from .model.allocator import MID_SEGMENT, SPLIT_ABOVE
from .vllm_rules import cudagraph_mode


def _request_counts(max_num_seqs: int, cap: int = 512) -> list[int]:
    """Request counts vLLM 0.33 captures uniform decode batches for: 1, 2, 4, 8..248 step 8, 256.. step 16 and
    max_num_seqs itself, up to min(max_num_seqs, 512) (config/vllm.py _set_cudagraph_sizes)."""
    m = min(max_num_seqs, cap)
    return sorted({n for n in (1, 2, 4) if n <= m} | set(range(8, min(m + 1, 256), 8)) | set(range(256, m + 1, 16))
                  | {m})


def cudagraph_sizes(max_num_seqs: int, spec_tokens: int, max_num_batched_tokens: int, *, runner: str = "v1",
                    uniform_decode: bool = False, preset_max: int | None = None) -> tuple[list[int], list[int]]:
    """Batch sizes vLLM captures: (PIECEWISE sizes, FULL decode sizes) for FULL_AND_PIECEWISE (config/vllm.py
    _set_cudagraph_sizes, 0.20-0.33). Base list [1, 2, 4] + 8..248 step 8 + 256..max step 16 (+ max_num_batched_tokens
    where it is below the max), max = min(seqs x (1+k) x 2, 512, max_num_batched_tokens), or a model's own (gpt-oss:
    1024, `preset_max`). 0.33 (`uniform_decode`, where the max is vLLM's default) adds the uniform decode batches:
    n x (1+k) for the request counts n up to the max (without a drafter: max_num_seqs). Model Runner V1 rounds every
    size up to a multiple of 1+k with a drafter and drops those past the max (compilation.py
    adjust_cudagraph_sizes_for_spec_decode: 256 seqs + MTP 2 capture 49 sizes up to 498,
    lab-vllm-0.26.0-h100/defaults/awq16-g-mtp2.log), its FULL sizes those up to seqs x (1+k); Model Runner V2 keeps
    the sizes and captures FULL graphs of each size rounded up, up to seqs x (1+k) (v1/worker/gpu/cudagraph_utils.py:
    Qwen3-8B at 64 seqs: 19 PIECEWISE to 128, 11 FULL to 64)."""
    step = 1 + spec_tokens
    top = min(preset_max if preset_max else min(max_num_seqs * step * 2, 512), max_num_batched_tokens)
    sizes = {s for s in (1, 2, 4) if s <= top} | set(range(8, min(top + 1, 256), 8)) | set(range(256, top + 1, 16))
    if max_num_batched_tokens <= top:
        sizes.add(max_num_batched_tokens)
    if uniform_decode and not preset_max:
        if step > 1:
            sizes |= {n * step for n in _request_counts(max_num_seqs) if n * step <= top}
        elif max_num_seqs <= top:
            sizes.add(max_num_seqs)
    if runner == "v2":
        pw = sorted(sizes)
        full = sorted({r for x in pw if (r := -(-x // step) * step) <= min(max_num_seqs * step, pw[-1])})
        return pw, full
    pw = [x for x in sorted({-(-s // step) * step for s in sizes}) if x <= top] or [top]
    return pw, [x for x in pw if x <= max_num_seqs * step]


def graph_mode(d: Deployment, backend: Backend) -> str:
    """vLLM's resolved cudagraph_mode (NONE, PIECEWISE or FULL_AND_PIECEWISE) for this deployment on `backend`."""
    return cudagraph_mode(d.enforce_eager, d.spec_tokens, backend.cudagraph_support)


def cudagraph_estimate(f: Features, c: Coefficients) -> float:
    """vLLM's 'Estimated CUDA graph memory' (V1 runner, 0.20.2+: gpu_model_runner.py profile_cudagraph_memory):
    per mode it captures the largest and second-largest graph into a throwaway pool and takes the first capture +
    (n - 1) x the second's; PIECEWISE and FULL share the pool, so the larger first capture counts once:
        max(PIECEWISE first, FULL first) + (n_pw - 1) x per PIECEWISE graph + (n_full - 1) x per FULL graph.
    The first captures grow with the largest size x hidden (its activations) and, FULL, x layers; a PIECEWISE graph's
    own memory grows with the layers (its nodes). Coefficients fitted on the 0.20.2 / 0.26.0 lab logs' DEBUG lines
    (profiles/coefficients/vllm-0.20.json); a profile with only the older constant + per-graph form uses that."""
    if f.eager or not f.num_cudagraphs:
        return 0.0
    if f.runner == "v2" and "cudagraph_v2_per_pw_graph_layer_bytes" in c.items:
        return cudagraph_estimate_v2(f, c)
    if "cudagraph_pw_first_bytes" not in c.items or not f.graph_sizes[0] or f.tp > 1:
        # an older profile or probe record, and tensor-parallel ranks (their all-reduces change the per-graph cost;
        # the constant + per-graph form was fitted with the TP 2 logs): the older form
        return c["cudagraph_base_bytes"] + c["cudagraph_per_graph_bytes"] * f.num_cudagraphs
    n_pw, s_pw, n_full, s_full = f.graph_sizes
    pw_first = c["cudagraph_pw_first_bytes"] + c["cudagraph_pw_first_per_token_hidden_bytes"] * s_pw * f.hidden
    full_first = (c["cudagraph_full_first_bytes"] + v1_full_attention_bytes(f, c)
                  + c["cudagraph_full_first_per_token_layer_bytes"] * s_full * f.layers) if n_full else 0.0
    return (max(pw_first, full_first) + max(n_pw - 1, 0) * c["cudagraph_pw_per_graph_per_layer_bytes"] * f.layers
            + max(n_full - 1, 0) * c["cudagraph_full_per_graph_bytes"] + c.get("cudagraph_offset_bytes", 0.0))


# FA3 runs one split, with no split-KV buffer, past this many decode sequences (flash_api.cpp: num_splits only
# where the batch is at most 992)
FA3_SPLIT_MAX_SEQS = 992


def v1_full_attention_bytes(f: Features, c: Coefficients) -> float:
    """What the largest FULL graph's attention adds to Model Runner V1's first FULL capture (bytes): FA3's split-KV
    buffer, which the builders force to 32 splits under FULL graphs (flash_attn.py / flashattn_mla.py
    max_num_splits, vLLM 0.20-0.26). Dense attention: fitted per token x hidden (the lab's dense logs; Qwen3-30B-A3B
    and Mixtral log 258 and 256 MiB at 512 tokens, 32 splits x 32 heads x 128 x 4 B a token). MLA: traced, 32 x heads
    x kv_lora_rank x 4 B a sequence (DeepSeek-V3 cut to 5 layers at 512: 4,224 MiB logged, 4,096 of them the
    buffer; lab-vllm-0.26.0-h200/moe-tokens). None past 992 sequences on FA3 (gpt-oss-20b's FULL graphs to 1,024: a
    2 MiB first capture)."""
    s_full = f.graph_sizes[3]
    if f.fa3_splits and s_full > FA3_SPLIT_MAX_SEQS:
        return 0.0
    if f.mla_split_bytes_per_seq:
        return float(f.mla_split_bytes_per_seq * s_full)
    return c["cudagraph_full_first_per_token_hidden_bytes"] * s_full * f.hidden


def cudagraph_estimate_v2(f: Features, c: Coefficients) -> float:
    """Model Runner V2's CUDA-graph estimate (vLLM 0.33, v1/worker/gpu/cudagraph_utils.py): it captures every
    PIECEWISE graph and every drafter graph into a throwaway pool, and of the FULL graphs the two largest, counting
    the second's memory again for each further one. Per PIECEWISE graph and layer a measured figure (a PIECEWISE
    graph captures one piece a layer); per FULL graph the
    largest FULL batch x hidden x a measured figure (its buffers grow with the batch); per drafter graph (MTP: its
    prefill graphs, PIECEWISE and FULL) a measured figure. Fitted on the dense and hybrid startups of the 0.33.0
    lab (profiles/coefficients/vllm-0.33.json), every one on FA3; FA4 and TRITON_FLASH_ATTN's FULL graphs were
    measured without the per-token term (Gemma 4 26B-A4B at 128 and 1,024 seqs: the PIECEWISE part alone gives
    0.30 and 0.44 GiB, logged 0.27 and 0.41 x 2; with it 0.33 and 0.73). Where logs measured a kind of model
    against this (MoE, MXFP4 experts, MLA, tensor parallel ranks), its ratio scales the estimate, an estimate with
    that coefficient's band."""
    if f.mla_split_bytes_per_seq and "cudagraph_v2_mla_base_bytes" in c.items:
        return mla_graph_estimate(f, c)[0]
    if f.sparse_mla_bytes_per_seq and "cudagraph_v2_sparse_mla_base_bytes" in c.items:
        return sparse_mla_graph_estimate(f, c)
    n_pw, _largest_pw, n_full, largest_full = f.graph_sizes
    est = (c["cudagraph_v2_per_pw_graph_layer_bytes"] * n_pw * f.layers
           + (c["cudagraph_v2_full_per_token_hidden_bytes"] * n_full * largest_full * f.hidden
              if f.full_graph_buffers else 0.0)
           + (c["cudagraph_v2_drafter_per_graph_bytes"] * (n_pw + n_full) if f.drafter_graphs else 0.0))
    return est * v2_graph_factor(f, c) + c.get("cudagraph_offset_bytes", 0.0)


def mla_graph_estimate(f: Features, c: Coefficients) -> tuple[float, float]:
    """Model Runner V2's estimate for MLA on FLASH_ATTN_MLA (bytes: the estimate, and its band's top), from
    vLLM 0.33.0's profiler (v1/worker/gpu/cudagraph_utils.py profile_cudagraph_memory): it captures every PIECEWISE
    size and the two largest FULL ones (F, B2) into a throwaway pool and returns the capture's drop + (N_FULL - 1) x
    max(the second's sample, 1 MiB). Entering a graph capture empties torch's cache (torch 2.14 graphs.py), which
    returns the eager warm-up's FA3 split buffer (O(B) = 32 splits x heads x kv_lora_rank x 4 B x B, up to 992
    sequences) before the sample ends: the sample is negative, so the floor applies and the freed buffer counts on
    top. Estimate = a base + per FULL-batch token and head x (F + B2) x heads (fitted: the decode graphs' other
    activations, per head) + m x O(F) + n x O(B2) + (N_FULL - 1) MiB. The multiplicities are the allocator's, a rule
    read off its segment sizes (helper note mla-s128.md; the mechanism not traced): n = 2 where the batch's absorbed
    query (2 x heads x kv_lora_rank B a sequence) fits no 20 MiB segment (DeepSeek: B2 >= 161); m = 2 where it does
    but the batch's hidden-size tensors leave the small pool (2 x hidden B a sequence above 1 MiB: 74 <= F <= 160).
    DeepSeek-V3 cut to 5 layers, 32 to 1,024 seqs: every log within 0.05 GiB, 96 and 152 held out (2.39 and 3.82
    logged; m = 1 gave 1.69 at 96)."""
    _n_pw, _s_pw, n_full, largest = f.graph_sizes
    second = f.second_full
    query = f.mla_split_bytes_per_seq // 64  # 2 B x heads x kv_lora_rank: the split buffer is 32 x 4 B of it

    def split(batch: int) -> float:
        return f.mla_split_bytes_per_seq * batch if batch <= FA3_SPLIT_MAX_SEQS else 0.0

    n = 2 if query * second > MID_SEGMENT else 1
    m = 2 if 2 * f.hidden * largest > SPLIT_ABOVE and query * largest <= MID_SEGMENT else 1
    base = (c["cudagraph_v2_mla_base_bytes"]
            + c["cudagraph_v2_mla_per_full_token_head_bytes"] * (largest + second) * f.mla_heads
            + max(n_full - 1, 0) * 2**20)
    est = base + m * split(largest) + n * split(second)
    return est, est + (split(largest) if m == 1 else 0.0)


def sparse_mla_graph_estimate(f: Features, c: Coefficients) -> float:
    """Model Runner V2's estimate for sparse MLA (DeepSeek V3.2, GLM-5), whose FULL graphs run the indexer and the
    attention inside (breakable graphs skip their breaks in FULL mode): the same profiler as MLA's
    (mla_graph_estimate), the eager warm-up's per-sequence buffers (layers/sparse_mla.py sparse_decode_bytes_per_seq)
    freed inside the second sample and counted for the largest and second FULL batch, + (N_FULL - 1) MiB and a base
    (fitted). DeepSeek-V3.2 and GLM-5 cut to 4 layers, kv auto and fp8: 8.01 / 4.63 / 1.12 GiB logged, within 0.04."""
    _n_pw, _s_pw, n_full, largest = f.graph_sizes
    return (c["cudagraph_v2_sparse_mla_base_bytes"] + f.sparse_mla_bytes_per_seq * (largest + f.second_full)
            + max(n_full - 1, 0) * 2**20)


def v2_graph_kind(f: Features) -> str:
    """The coefficient that scales a kind of model's V2 graph estimate ('' for a dense model): MLA, else MXFP4
    experts, else K and V heads of different dims (FLASH_ATTN_DIFFKV), else the model's own where its family measured
    one (Gemma 4 26B-A4B: with its tower and without), else a multimodal prefix LM with its tower (its prefix-LM
    backend), else an MoE, else the loaded tower's (Tower.graph_factor: '' where its embeddings were measured to
    change nothing)."""
    return ("cudagraph_v2_mla_factor" if f.mla_heads else "cudagraph_v2_mxfp4_factor" if f.mxfp4_moe_layers
            else "cudagraph_v2_diffkv_factor" if f.diffkv else f.model_graph_factor if f.model_graph_factor
            else "cudagraph_v2_prefix_lm_factor" if f.prefix_lm_tower else "cudagraph_v2_moe_factor" if f.moe
            else f.tower_graph_factor if f.embeds_tower else "")


def v2_graph_factor(f: Features, c: Coefficients) -> float:
    """The measured ratio of a kind of model's V2 graph estimate to the dense one's (1 where none was measured),
    times a tensor-parallel rank's."""
    kind = v2_graph_kind(f)
    factor = c.get(kind, 1.0) if kind else 1.0
    return factor * (c.get("cudagraph_v2_tp_factor", 1.0) if f.tp > 1 else 1.0)
