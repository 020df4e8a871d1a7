"""The probe's progress: each startup's phase read from vLLM's own log lines, the elapsed time and what is left
(probe/phases.py), against the lab's real logs and a live probe of the simulated vLLM."""

from pathlib import Path

import pytest

from vrambudget.probe.phases import PHASES, PRIOR_SECONDS, PhaseClock, kind, phase_of, phase_seconds, prior

LAB = Path(__file__).parent / "fixtures" / "lab-vllm-0.20.2-h100"


def eager(text):
    return "'enforce_eager': True" in text


@pytest.mark.parametrize("key", sorted(PRIOR_SECONDS))
def test_every_prior_is_what_its_lab_logs_took(key):
    want, logs = PRIOR_SECONDS[key]
    got: dict[str, float] = {}
    for log in logs:  # the first log's phases, the rest from the next (a startup cut short after profiling)
        text = (LAB / log).read_text()
        for phase, seconds in phase_seconds(text, eager(text)).items():
            got.setdefault(phase, round(seconds))
    assert got == want


def test_a_real_cuda_graph_boot_goes_through_every_phase_in_order():
    text = (LAB / "outside" / "fi-graphs" / "startup-02.log").read_text()
    seen, clock = [], PhaseClock()
    lines = text.splitlines(keepends=True)
    for i in range(0, len(lines), 5):  # the log as the probe reads it: a chunk at a time
        if clock.update("".join(lines[i:i + 5]), float(i)):
            seen.append(clock.phase)
    assert seen == list(PHASES[1:])
    took = phase_seconds(text)
    assert round(took["compiling"]) == 7 and round(took["profiling"]) == 125  # 12:32:01 -> :08 -> 12:34:13


def test_eager_has_no_compile_phase():
    text = (LAB / "p4" / "startup-01.log").read_text()
    assert eager(text) and phase_of(text, eager=True) == "ready"
    assert "compiling" not in phase_seconds(text, eager=True)
    assert phase_of(text.split("Model loading took")[0] + "Model loading took", eager=True) == "profiling"
    assert phase_of(text.split("Model loading took")[0] + "Model loading took") == "compiling"


def test_what_is_left_counts_the_phases_ahead_and_the_rest_of_this_one():
    expected, source = prior(kind(False, "cold"))
    clock = PhaseClock(expected, source)
    clock.update("... Model loading took 10.65 GiB memory", 51.0)  # compiling began 51 s in
    assert clock.phase == "compiling"
    ahead = sum(expected[p] for p in ("profiling", "allocating the KV cache", "capturing graphs",
                                      "starting the API server"))
    assert clock.left(61.0) == pytest.approx(ahead + expected["compiling"] - 10)
    assert clock.left(500.0) == pytest.approx(ahead)  # overrunning a phase never gives a negative rest
    assert clock.line(61.0) == f"compiling, 61 s in; about {ahead + 55:.0f} s left ({source})"
    assert PhaseClock().line(3.0) == "starting, 3 s in"  # nothing to estimate from: no figure invented


def test_a_live_probe_reports_each_phase_then_estimates_from_its_own_startups(tmp_path, monkeypatch):
    import json
    import sys

    from vrambudget import coefficients
    from vrambudget.deployment import Flags, resolve
    from vrambudget.hardware import catalog as gpus
    from vrambudget.model.checkpoint import resolve_model
    from vrambudget.probe.session import ProbeOptions, Prober
    from vrambudget.vllm_rules import rules_for

    truth = {"total_gib": 79.18, "weights_gib": 16.80, "mtp_gib": 0.46, "activation_gib": 0.10, "non_torch_gib": 0.22,
             "cold_extra_gib": 0.0, "warm_extra_gib": 0.0, "cudagraph_gib": 0.12, "model_profile": "qwen3.5-9b",
             "faults": {"phase_seconds": 0.3}, "state_dir": str(tmp_path / "state")}
    (tmp_path / "truth.json").write_text(json.dumps(truth))
    monkeypatch.setenv("SIMVLLM_TRUTH", str(tmp_path / "truth.json"))
    d = resolve(resolve_model("qwen3.5-9b"), gpus.lookup("h100"), rules_for("0.20.2"),
                Flags(gpu_memory_utilization=0.25, kv_cache_dtype="fp8", enforce_eager=False, max_num_seqs=8,
                      max_num_batched_tokens=2048))
    o = ProbeOptions(vllm_cmd=[sys.executable, str(Path(__file__).parent / "sim_vllm.py"), "serve"],
                     runs_dir=tmp_path / "runs", startup_timeout=60, verify=False, max_startups=2,
                     poll_seconds=0.02)
    lines: list[str] = []
    Prober(d, coefficients.load("0.20"), o, report=lines.append).bisect()
    first = [x for x in lines if x.startswith("[1] ") and " s in" in x and ": ready," not in x]
    phases = [x.split(": ", 1)[1].split(",")[0] for x in first]
    # (a last tick may land between vLLM's "startup complete" line and its first health answer: its "ready" line
    # is left out above)
    assert phases == ["loading weights", "compiling", "profiling", "allocating the KV cache", "capturing graphs"], lines
    assert all("estimate from the lab's graphs-cold startup on an H100" in x for x in first)
    second = [x for x in lines if x.startswith("[2] ") and " s in" in x and ": ready," not in x]
    assert second and all("(as startup 1 took)" in x for x in second), lines
