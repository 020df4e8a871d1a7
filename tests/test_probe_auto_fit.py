"""The probe's default search where vLLM fits the length itself (--max-model-len auto), against the simulated vLLM
(tests/sim_vllm.py): the compile-cache key holds the length vLLM started from, so the second boot of the same
command is warm and fits the ceiling after a restart. Two startups with CUDA graphs, one in eager mode, whatever
the prediction's error; a verify that fails hands over to the fixed-length search below it."""

from vrambudget.output.render import probe_summary_text
from vrambudget.profiles import read_jsonl

from .test_probe import deployment, prober, sim, starts, truth_ceiling  # noqa: F401 (fixture)


def test_graphs_the_ceiling_after_a_restart_in_two_startups(sim, tmp_path):
    truth = sim()  # activation 0.40 GiB where the model predicts 0.27: the prediction is too high
    d = deployment(gmu=0.27, eager=False)
    p, lines = prober(tmp_path, d, auto_fit=True)
    out = p.bisect()
    warm, cold = truth_ceiling(truth, d, "warm"), truth_ceiling(truth, d, "cold")
    assert out["startups"] == 2 and out["strategy"] == "auto-fit"
    assert out["ceiling"] == warm and out["first_boot"] == cold < warm
    assert out["ceiling"] != out["predicted"]  # the prediction's error does not cost a startup
    a1, a2 = out["attempts"]
    assert (a1["max_model_len"], a1["compile"], a1["verify"]) == (-1, "cold", True)  # the first boot's own fit serves
    assert (a2["max_model_len"], a2["compile"], a2["verify"]) == (-1, "warm", True)
    assert all("--max-model-len" in s["argv"] and s["argv"][s["argv"].index("--max-model-len") + 1] == "-1"
               for s in starts(truth))
    recs = [r for r in read_jsonl(tmp_path / "runs" / "records.jsonl") if r.get("kind") != "verify"]
    assert [r["facts"]["max_model_len"] for r in recs] == [cold, warm]
    text = probe_summary_text(out)
    assert f"auto -> {warm:,}" in text and "in 2 startups" in text and "the ceiling after a restart" in text
    assert any("boots warm and fits the ceiling after a restart" in x for x in lines)


def test_eager_one_startup_verified(sim, tmp_path):
    truth = sim()
    d = deployment()
    p, _ = prober(tmp_path, d, auto_fit=True)
    out = p.bisect()
    assert out["startups"] == 1 and out["ceiling"] == truth_ceiling(truth, d)
    assert out["attempts"][0]["verify"] is True


def test_a_fitted_length_that_does_not_serve_hands_over_to_fixed_lengths(sim, tmp_path):
    truth = sim(faults={"runtime_oom_above": 60000})
    d = deployment()
    p, lines = prober(tmp_path, d, auto_fit=True, max_startups=10)
    out = p.bisect()
    assert truth_ceiling(truth, d) > 60000
    assert out["attempts"][0]["max_model_len"] == -1 and out["attempts"][0]["verify"] is False
    assert 0 < out["ceiling"] and out["ceiling"] * 0.98 - 16 <= 60000
    assert out["strategy"] == "auto-fit, then fixed lengths"
    assert any("did not serve: searching fixed lengths below" in x for x in lines)


def test_a_cap_verifies_no_more_than_asked(sim, tmp_path):
    truth = sim()
    d = deployment(eager=False, gmu=0.27)
    p, _ = prober(tmp_path, d, auto_fit=True, max_model_len=32768)
    out = p.bisect()
    assert truth_ceiling(truth, d, "warm") > 32768
    assert out["ceiling"] == 32768 and out["startups"] == 2
    verifies = [r for r in read_jsonl(tmp_path / "runs" / "records.jsonl") if r.get("kind") == "verify"]
    assert verifies[-1]["verify"]["ok"]


def test_compiled_graphs_already_cached_one_startup(sim, tmp_path):
    """The lab's 0.33.0 run of the main command: a second probe on the same host found the first's compiled graphs,
    so its first boot was warm, fitted the ceiling after a restart and was verified (1 startup)."""
    truth = sim()
    d = deployment(gmu=0.27, eager=False)
    prober(tmp_path / "a", d, auto_fit=True)[0].bisect()  # leaves the simulated compile cache behind
    out = prober(tmp_path / "b", d, auto_fit=True)[0].bisect()
    assert out["startups"] == 1 and out["attempts"][0]["compile"] == "warm"
    assert out["ceiling"] == truth_ceiling(truth, d, "warm") and out["attempts"][0]["verify"] is True
    assert "already cached" in out["attempts"][0]["why"]
