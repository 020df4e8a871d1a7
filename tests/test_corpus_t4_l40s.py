"""Issue 22, seventh session: a Tesla T4 on vLLM 0.30.0 (Qwen2.5-1.5B-Instruct, its config from public copies) and the
L40S's total from public OOM messages. Figures are the log's own (tests/fixtures/public-logs, sources.json)."""

from vrambudget.hardware import catalog as gpus
from vrambudget.units import GiB

from .test_public_logs import PUBLIC, facts
from .test_corpus_strangers import predicted_available

T4_LOG = "c-t4-qwen2.5-1.5b-v0.30.0.log"
L40S_LOG = "c-l40s-r1-distill-qwen-32b-fp8-v0.11.0.log"


def test_the_t4_log_states_its_own_card_and_a_warm_aot_compile():
    f, src = facts(T4_LOG)
    assert (f.vllm_version, f.total_gib, f.free_at_start_gib) == ("0.30.0", 14.56, 14.46)
    assert (f.weights_gib, f.available_kv_gib, f.kv_cache_tokens) == (2.98, 8.67, 324704)
    assert f.compile == "warm"  # 'Directly load AOT compilation from path ...' (vLLM 0.30's AOT compile cache)
    assert "Checkpoint size: 2.88 GiB" in (PUBLIC / T4_LOG).read_text()  # the load adds 0.10 GiB on 0.30 (noted)
    assert src["gpu"] == "t4" and "Tesla T4" in src["gpu_evidence"]


def test_the_t4_log_is_predicted_within_half_a_gib_from_its_own_total():
    logged, pred = predicted_available(T4_LOG)
    # vLLM 0.30 runs this model on Model Runner V2 (the log says 'Using V2 Model Runner'): planned with the 0.29
    # range (vllm_rules: V2 for every model, its graphs estimated into the budget, its per-request buffers counted),
    # the model holds 0.16 GiB more outside the KV cache than vLLM did on this Turing card (0.45 with 0.26's rules)
    assert round(pred - logged, 2) == -0.16


def test_the_l40s_total_is_pytorchs_public_figure_and_moves_its_log():
    l40s = gpus.lookup("l40s")
    assert round(l40s.total_bytes / GiB, 2) == 44.39 and "44.39 GiB" in l40s.source
    logged, pred = predicted_available(L40S_LOG)
    assert (logged, round(pred - logged, 2)) == (6.04, 0.26)  # +0.44 with the old estimate (46,068 MiB less 0.4 GiB)
