"""The probe as a supervisor (issue 36): every way a probe ends (a reply that is not HTTP, Ctrl-C, SIGTERM, a
crash, a time-out) stops every process it started; a runs folder serves one probe at a time; bad timing options
are one line, exit 2, and leave nothing on disk. Against the simulated vLLM (tests/sim_vllm.py)."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from vrambudget.cli import app
from vrambudget.errors import UserError
from vrambudget.probe.session import ProbeOptions, claim

from .test_probe import BASE, SIM, deployment, prober, running, starts

ARGS = ["--model", "qwen3.5-9b", "--gpu", "h100", "--gmu", "0.25", "--kv-cache-dtype", "fp8", "--mtp", "2",
        "--enforce-eager", "--max-num-seqs", "8", "--max-num-batched-tokens", "2048", "--vllm-version", "0.20.2"]


@pytest.fixture
def truth(tmp_path, monkeypatch):
    def make(**faults):
        t = {**BASE, "faults": faults, "state_dir": str(tmp_path / "state")}
        (tmp_path / "truth.json").write_text(json.dumps(t))
        monkeypatch.setenv("SIMVLLM_TRUTH", str(tmp_path / "truth.json"))
        return t
    return make


def _wait_for_start(t: dict, timeout: float = 30.0) -> dict:
    """The first start the simulated vLLM recorded (it writes starts.log before its first log line)."""
    path = Path(t["state_dir"]) / "starts.log"
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if path.exists() and path.read_text().strip():
            return json.loads(path.read_text().splitlines()[0])
        time.sleep(0.05)
    raise AssertionError("the simulated vLLM never started")


def test_a_port_answering_garbage_times_out_and_leaves_no_process(truth, tmp_path):
    t = truth(not_http=True)
    p, _ = prober(tmp_path, deployment(), timeout=0.8)
    out = p.bisect()  # http.client.BadStatusLine on every health check: treated as "not ready yet"
    assert out["failed"] == "timed_out" and out["startups"] >= 1
    for s in starts(t):
        assert not running(s["pid"]) and not running(s["child"])


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 130)])
def test_a_signal_during_a_startup_stops_the_server_group(truth, tmp_path, sig, code):
    t = truth(hang=True)
    runs = tmp_path / "runs"
    probe = subprocess.Popen([sys.executable, "-m", "vrambudget.cli", "probe", *ARGS, "--vllm-cmd", " ".join(SIM),
                              "--runs-dir", str(runs), "--poll-seconds", "0.02"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ})
    s = _wait_for_start(t)
    probe.send_signal(sig)
    _, err = probe.communicate(timeout=60)
    assert probe.returncode == code
    assert "interrupted" in err and "every server it started is stopped" in err and "Traceback" not in err
    assert not running(s["pid"]) and not running(s["child"])
    assert (runs / "startup-01.log").exists()  # what it had is kept


def test_a_crash_with_the_default_fit_still_summarises(truth, tmp_path):
    truth(crash=True)
    r = CliRunner().invoke(app, ["probe", *ARGS, "--vllm-cmd", " ".join(SIM), "--runs-dir", str(tmp_path / "runs"),
                                 "--json", "--poll-seconds", "0.02"])
    assert r.exit_code == 1, r.output  # the answer is no, not bad input
    out = json.loads(r.stdout)
    assert out["failed"] == "crashed" and "nothing to fit" in out["fit"]["skipped"]


def test_a_runs_folder_serves_one_probe_at_a_time(truth, tmp_path):
    truth()
    runs = tmp_path / "runs"
    p, _ = prober(tmp_path, deployment())
    with claim(runs):  # another probe holds it
        with pytest.raises(UserError, match=r"another probe \(pid \d+\) is using --runs-dir"):
            p.bisect()
    assert not list(runs.glob("startup-*.log"))
    assert p.bisect()["startups"] >= 1  # free again once the other is done


def test_logs_are_never_overwritten_even_when_named_meanwhile(truth, tmp_path):
    truth()
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "startup-01.log").write_text("another probe's log\n")
    (runs / "startup-02.log").write_text("and another\n")
    p, _ = prober(tmp_path, deployment())
    p.bisect()
    assert (runs / "startup-01.log").read_text() == "another probe's log\n"
    assert (runs / "startup-02.log").read_text() == "and another\n"
    assert (runs / "startup-03.log").read_text().startswith("INFO")


@pytest.mark.parametrize("flag, value", [("--startup-timeout", "nan"), ("--startup-timeout", "-1"),
                                         ("--startup-timeout", "inf"), ("--poll-seconds", "0"),
                                         ("--port", "99999"), ("--vllm-cmd", "'unclosed")])
def test_bad_timing_options_are_one_line_and_leave_no_runs_folder(truth, tmp_path, flag, value):
    truth()
    runs = tmp_path / "runs"
    args = ["probe", *ARGS, "--runs-dir", str(runs), flag, value]
    if flag != "--vllm-cmd":
        args += ["--vllm-cmd", " ".join(SIM)]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 2, r.output
    assert r.stderr.startswith("error: ") and r.stderr.count("\n") == 1 and flag in r.stderr
    assert not runs.exists()
    assert not (Path(truth()["state_dir"]) / "starts.log").exists()  # vLLM never started


def test_options_are_validated_where_they_are_made():
    for bad in ({"startup_timeout": float("nan")}, {"request_timeout": -1.0}, {"poll_seconds": float("inf")},
                {"verify_fraction": 1.5}, {"vllm_cmd": []}):
        with pytest.raises(UserError):
            ProbeOptions(**{"vllm_cmd": SIM, **bad})
