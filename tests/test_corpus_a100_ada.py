"""Issue 22, eighth session: two more A100 40GB boots (vLLM 0.15.1 eager Llama-3.1-8B, vLLM 0.19.1 Qwen3-8B with warm
graphs), an RTX 6000 Ada boot (vLLM 0.15.1, a Llama-3.1-8B merge) and the 0.10-0.16 range's eager non-torch memory. Figures are the logs' own (tests/fixtures/public-logs,
sources.json names each log's repository, commit and the evidence for its card)."""

from vrambudget import coefficients as coeffs
from vrambudget.hardware import catalog as gpus
from vrambudget.units import GiB

from .test_public_logs import facts
from .test_corpus_strangers import predicted_available

EAGER_0151 = "c-a100-40gb-llama3.1-8b-v0.15.1.log"
QWEN3_0191 = "c-a100-40gb-qwen3-8b-v0.19.1.log"
ADA6000 = "c-rtx6000ada-llama3.1-8b-v0.15.1.log"


def test_the_two_logs_state_their_flags_weights_and_kv_memory():
    f, src = facts(EAGER_0151)
    assert (f.vllm_version, f.weights_gib, f.available_kv_gib, f.kv_cache_tokens) == ("0.15.1", 14.99, 19.28, 157936)
    assert f.args.get("enforce_eager") is True and src["gpu"] == "a100-40gb" and "a2-highgpu-1g" in src["gpu_evidence"]
    f, src = facts(QWEN3_0191)
    assert (f.vllm_version, f.weights_gib, f.available_kv_gib, f.kv_cache_tokens) == ("0.19.1", 15.27, 19.36, 140960)
    assert f.compile == "warm" and "3380462" in src["gpu_evidence"]  # nvidia-smi names the card by its EngineCore pid


def test_both_are_predicted_within_a_tenth_of_a_gib():
    logged, pred = predicted_available(EAGER_0151)
    assert round(pred - logged, 2) == -0.10  # -0.30 with 0.20's eager non-torch memory (0.22 GiB) in the 0.10 range
    logged, pred = predicted_available(QWEN3_0191)
    assert round(pred - logged, 2) == -0.08  # its weights 15.272 GiB planned, 15.27 logged


def test_an_eager_boot_of_0_10_to_0_16_holds_the_graph_modes_non_torch_memory():
    """vLLM 0.10-0.16 capture CUDA graphs after sizing the KV cache, so their profile is the same eager or not: the
    range's per-architecture non-torch figures (public 0.10.2 logs) stand for eager boots too, not 0.20's 0.22 GiB."""
    c10, c20 = coeffs.load("0.10"), coeffs.load("0.20")
    for arch in ("ampere", "ada", "turing", "hopper"):
        assert c10[f"non_torch_eager_bytes@{arch}"] == c10[f"non_torch_graphs_bytes@{arch}"]
    assert round(c10["non_torch_eager_bytes@ampere"] / GiB, 2) == 0.02 and round(c20["non_torch_eager_bytes"] / GiB, 2) == 0.22


def test_the_rtx_6000_ada_boot_and_the_cards_public_total():
    """The card from its own session ('Hardware: NVIDIA RTX 6000 Ada Generation', 'VRAM: 47.5 GB'), its total
    PyTorch's 47.50 GiB for the 49140 MiB card; predicted within 0.01 GiB (the sort sampler at 256 rows plus 0.10.2's
    base and pre-Hopper non-torch memory: 26.53 against 26.54)."""
    card = gpus.lookup("rtx6000-ada")
    assert (round(card.total_bytes / GiB, 2), card.memory_mib, card.architecture) == (47.50, 49140, "ada")
    f, src = facts(ADA6000)
    assert (f.vllm_version, f.weights_gib, f.available_kv_gib, f.kv_cache_tokens) == ("0.15.1", 14.99, 26.54, 217376)
    assert f.max_model_len == 128000 and "RTX 6000 Ada Generation" in src["gpu_evidence"]
    logged, pred = predicted_available(ADA6000)
    assert (logged, round(pred, 2)) == (26.54, 26.53)
