"""The sampler's dummy run of vLLM 0.10-0.16 on this GPU, torch only (no vLLM): its peak, by rows and vocabulary.

vLLM profiles the KV budget with a dummy forward pass, then a dummy sampler run over max_num_seqs rows
(v1/worker/gpu_model_runner.py `_dummy_sampler_run`). Up to 0.16 (and on 0.10.x-0.11.0 wherever FlashInfer is
missing, which they log as 'Falling back to the PyTorch-native implementation of top-p & top-k sampling'; 0.11.1+
made FlashInfer's sampler opt-in) that run takes the sort-based top-k/top-p path: its peak is what the profile's
'peak activation' shows at large max_num_seqs. 0.17 replaced the sort with a Triton kernel for 8 rows or more.

The sequence below follows vLLM 0.11.0's source, step by step, with each tensor's lifetime as there:
  _dummy_sampler_run   rand_like(hidden states) -> compute_logits (bf16 rows x vocab) -> dummy metadata
                       (temperature 0.5, top_p 0.9, top_k vocab - 1, all_greedy and all_random False)
  Sampler.forward      logits.to(float32); no penalties, no allowed/bad-word masks
  Sampler.sample       greedy argmax; temperature: where(temp < eps, 1, temp) and logits.div_
  apply_top_k_top_p    sort (values, int64 indices); top-k: gather, <, masked_fill_; top-p: softmax,
                       cumsum(out=), <=, [:, -1] = False, masked_fill_; scatter back (a new tensor)
  forward_native       softmax (float32, a new tensor); random_sample: empty_like, exponential_, div_, argmax
  Sampler.sample       where(temp < eps, greedy, random, out=greedy)
Reported per case: the torch 'allocated_bytes.all.peak' increase over the memory allocated at the call (what
vLLM's memory_profiling reads as the peak activation), and the sort alone's increase over its fp32 input.

    python benchmarks/lab/sampler_probe.py OUT.json
"""

from __future__ import annotations

import json
import sys
import time

import torch

EPS = 1e-5
ROWS = (8, 16, 32, 64, 128, 256, 512, 1024)
# vocabularies of the public logs' models (config.json vocab_size) and the hidden size of their lm_head
MODELS = {"llama3": (128256, 4096), "qwen3-moe": (151936, 2048), "qwen2.5-7b": (152064, 3584),
          "phi3-mini": (32064, 3072)}


def peak_above(fn) -> tuple[int, int]:
    """(peak allocated bytes above the start, bytes still allocated after) of fn()."""
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    start = torch.cuda.memory_allocated()
    keep = fn()
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() - start
    after = torch.cuda.memory_allocated() - start
    del keep
    return peak, after


def top_k_top_p(logits: torch.Tensor, k: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
    """The sort-based top-k / top-p mask of vLLM 0.10-0.16, its tensors alive as long as there."""
    values, order = logits.sort(dim=-1, descending=False)
    cut = values.size(1) - k.to(torch.long)
    cut = values.gather(1, cut.unsqueeze(dim=1))
    k_mask = values < cut
    values.masked_fill_(k_mask, -float("inf"))
    probs = values.softmax(dim=-1)
    csum = torch.cumsum(probs, dim=-1, out=probs)
    p_mask = csum <= 1 - p.unsqueeze(dim=1)
    p_mask[:, -1] = False
    values.masked_fill_(p_mask, -float("inf"))
    return values.scatter(dim=-1, index=order, src=values)


def sampler_run(hidden: torch.Tensor, lm_head: torch.Tensor) -> torch.Tensor:
    rows_hidden = torch.rand_like(hidden)
    logits_bf16 = rows_hidden @ lm_head.t()
    n, vocab = logits_bf16.shape
    temperature = torch.full((n,), 0.5, device="cuda")
    top_p = torch.full((n,), 0.9, device="cuda")
    top_k = torch.full((n,), vocab - 1, device="cuda")
    penalties = [torch.full((n,), 0.1, device="cuda") for _ in range(3)]
    logits = logits_bf16.to(torch.float32)
    greedy = logits.argmax(dim=-1).view(-1)
    temp = torch.where(temperature < EPS, 1.0, temperature)
    logits = logits.div_(temp.unsqueeze(dim=1))
    masked = top_k_top_p(logits, top_k, top_p)
    probs = masked.softmax(dim=-1, dtype=torch.float32)
    q = torch.empty_like(probs)
    q.exponential_()
    sampled = probs.div_(q).argmax(dim=-1).view(-1)
    out = torch.where(temperature < EPS, greedy, sampled, out=greedy)
    del penalties
    return out.long().to(torch.int32)


def main(argv: list[str]) -> int:
    t0 = time.time()
    rows_out = []
    for name, (vocab, hidden_size) in MODELS.items():
        lm_head = torch.randn(vocab, hidden_size, device="cuda", dtype=torch.bfloat16)
        for rows in ROWS:
            hidden = torch.randn(rows, hidden_size, device="cuda", dtype=torch.bfloat16)
            peak, after = peak_above(lambda: sampler_run(hidden, lm_head))
            x = torch.randn(rows, vocab, device="cuda", dtype=torch.float32)
            sort_peak, _ = peak_above(lambda: x.sort(dim=-1))
            elems = rows * vocab
            rows_out.append({"model": name, "vocab": vocab, "hidden": hidden_size, "rows": rows,
                             "peak_bytes": peak, "after_bytes": after, "sort_peak_bytes": sort_peak,
                             "peak_bytes_per_element": round(peak / elems, 3),
                             "sort_bytes_per_element": round(sort_peak / elems, 3)})
            print(json.dumps(rows_out[-1]), flush=True)
            del hidden, x
        del lm_head
    out = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "cuda": torch.version.cuda,
           "seconds": round(time.time() - t0, 1), "cases": rows_out}
    text = json.dumps(out, indent=1)
    if len(argv) > 1:
        with open(argv[1], "w") as fh:
            fh.write(text + "\n")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
