"""The probe as a supervisor (issue 36): every way a probe ends (a reply that is not HTTP, Ctrl-C, SIGTERM, a
crash, a time-out) stops every process it started; a runs folder serves one probe at a time; bad timing options
are one line, exit 2, and leave nothing on disk; and no process it started outlives it, not after a second SIGTERM
while a server ignores the first, not after a SIGKILL of the probe, not when a child leaves the server's process
group (the reaper's tag and supervisor). Against the simulated vLLM (tests/sim_vllm.py)."""

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
from vrambudget.probe import reaper
from vrambudget.probe.server import MemoryBlocker, ServerProcess, free_port
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


# -- nothing it started outlives it (reaper.py) ----------------------------------------------------------------
def _until(cond, timeout: float = 10.0):
    """`cond()` once it is true (checked every 10 ms), else its last value after `timeout` s."""
    end = time.monotonic() + timeout
    while not (value := cond()) and time.monotonic() < end:
        time.sleep(0.01)
    return value


def _carrying(marker: str) -> set[int]:
    """Running processes (zombies aside) other than this one whose environment holds `marker`: everything a test's
    probe started, and the probe, carries its SIMVLLM_TRUTH."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                env = (entry / "environ").read_bytes()
            except OSError:
                continue
            if marker.encode() in env.split(b"\0") and running(int(entry.name)):
                found.add(int(entry.name))
    return found


def _marker() -> str:
    return f"SIMVLLM_TRUTH={os.environ['SIMVLLM_TRUTH']}"


def _escaped(t: dict, n: int = 1) -> list[int]:
    log = Path(t["state_dir"]) / "escaped.log"
    pids = _until(lambda: log.exists() and len(log.read_text().splitlines()) >= n and log.read_text().split())
    assert pids, "the simulated vLLM's escaping child never started"
    return [int(x) for x in pids]


class _Probe(subprocess.Popen):
    """A probe run as a command; leaving its block kills it if it still runs (a failed test leaves nothing)."""

    def __exit__(self, *exc):
        if self.poll() is None:
            self.kill()
        self.communicate()


def _probe(runs: Path) -> subprocess.Popen:
    return _Probe([sys.executable, "-m", "vrambudget.cli", "probe", *ARGS, "--vllm-cmd", " ".join(SIM),
                             "--runs-dir", str(runs), "--poll-seconds", "0.02"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ})


def test_a_second_sigterm_while_a_server_ignores_the_first_kills_it_at_once(truth, tmp_path):
    t = truth(hang=True, ignore_sigterm=True, setpgid_child=True)
    with _probe(tmp_path / "runs") as probe:
        s, daemon = _wait_for_start(t), _escaped(t)[0]
        probe.send_signal(signal.SIGTERM)
        assert _until(lambda: (Path(t["state_dir"]) / "sigterm.log").exists())  # it is stopping it (grace 30 s)
        probe.send_signal(signal.SIGTERM)
        _, err = probe.communicate(timeout=10)
    assert probe.returncode == 130 and "every server it started is stopped" in err and "Traceback" not in err
    assert not running(s["pid"]) and not running(s["child"]) and not running(daemon)
    assert _until(lambda: not _carrying(_marker()), 5), _carrying(_marker())  # the supervisor too, once done


def test_a_probe_killed_with_sigkill_leaves_nothing_it_started(truth, tmp_path):
    t = truth(hang=True, setsid_child=True)
    # not the probe's: the same environment, another probe's tag; it must survive
    stranger = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                                env={**os.environ, reaper.VAR: "0123456789abcdef.1"})
    try:
        with _probe(tmp_path / "runs") as probe:
            s, daemon = _wait_for_start(t), _escaped(t)[0]
            probe.kill()
        assert _until(lambda: _carrying(_marker()) == {stranger.pid}, 10), _carrying(_marker())
        assert not running(s["pid"]) and not running(s["child"]) and not running(daemon)
        assert stranger.poll() is None
    finally:
        stranger.kill()
        stranger.wait()


def test_children_that_left_the_process_group_are_stopped_with_their_server(truth, tmp_path):
    t = truth(hang=True, ignore_sigterm=True, setsid_child=True, setpgid_child=True)
    srv = ServerProcess([*SIM, "qwen3.5-9b"], tmp_path / "startup-01.log", free_port(), poll=0.02)
    srv.start()
    s, daemons = _wait_for_start(t), _escaped(t, 2)
    assert all(os.getpgid(d) != srv.pid for d in daemons)  # killpg misses them
    srv.stop(grace=0.2)  # SIGTERM ignored: SIGKILL after 0.2 s, to every process of the tree
    assert not running(s["pid"]) and not running(s["child"]) and not any(map(running, daemons))
    assert _until(lambda: not _carrying(_marker()), 5), _carrying(_marker())


BLOCKER = ("import sys, time, signal; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('READY 1 2', flush=True); "
           "time.sleep(60)")  # deaf to SIGTERM and to its stdin closing


def test_the_blocker_ends_when_the_probe_is_killed(tmp_path):
    """A blocker that ignores SIGTERM and its stdin closing: the supervisor SIGKILLs it after its grace."""
    driver = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\nfrom vrambudget.probe import reaper\n"
         "from vrambudget.probe.server import MemoryBlocker\nreaper.shared().grace = 0.2\n"
         "b = MemoryBlocker(0, [sys.executable, '-c', sys.argv[1]])\nb.start()\nprint(b.pid, flush=True)\n"
         "time.sleep(60)", BLOCKER], stdout=subprocess.PIPE, text=True)
    pid = int(driver.stdout.readline())
    assert running(pid)
    driver.kill()
    driver.communicate(timeout=5)
    assert _until(lambda: not running(pid), 5)


def test_the_blocker_is_killed_by_its_own_stop():
    b = MemoryBlocker(0, [sys.executable, "-c", BLOCKER])
    b.start()
    pid = b.pid
    b.stop(grace=0.2)
    assert not running(pid)
