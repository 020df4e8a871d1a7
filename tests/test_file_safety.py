"""Files vrambudget writes and reads, against hostile targets (the held-out round of issue 'file safety'):
--out / --plot onto a device, a named pipe, a folder or a symbolic link; a model folder holding a FIFO, a folder or
an unreadable file where a shard or config.json should be; a full disk and a read-only target; a records file torn
by a killed probe; eight fits of one profile at once. Each refusal is one line on stderr, exit 2, nothing on stdout,
and leaves whatever the user had as it was."""

from __future__ import annotations

import errno
import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from vrambudget import profiles
from vrambudget.errors import UserError
from vrambudget.probe import records

from .cli_run import run

FIX = Path(__file__).parent / "fixtures"
AWQ = FIX / "models" / "qwen3.5-9b-awq"
P9B = FIX / "probe-vllm-0.20.2-h200" / "p9b" / "records.jsonl"
SERVE = ["serve-cmd", "--gpu", "h100", "-m", "qwen3-8b", "--checkpoint", "me/x"]
FIT = ["fit", str(P9B), "--gpu", "h200"]


def refused(code: int, out: str, err: str, *says: str) -> None:
    assert code == 2, (code, out, err)
    assert out == "" and len(err.splitlines()) == 1 and err.startswith("error:"), (out, err)
    assert "Traceback" not in err
    for s in says:
        assert s in err, (s, err)


def listing(folder: Path) -> dict[str, tuple[int, bytes | str | None]]:
    """Every entry of `folder` (not following links): its type and content (a file's bytes, a link's target)."""
    out = {}
    for p in sorted(folder.rglob("*")):
        st = os.lstat(p)
        if stat.S_ISLNK(st.st_mode):
            body: bytes | str | None = os.readlink(p)
        elif stat.S_ISREG(st.st_mode):
            body = p.read_bytes()
        else:
            body = None
        out[str(p.relative_to(folder))] = (stat.S_IFMT(st.st_mode), body)
    return out


@pytest.fixture
def hostile(tmp_path):
    """A folder of targets: a FIFO (held open for reading and writing, so no test can hang on it), a folder with a
    neighbour 'dir.png', a symbolic link to a file of the user's, a dangling link, and a device where one can be
    made (root: a null device of our own, never the system's /dev/null)."""
    d = tmp_path / "targets"
    d.mkdir()
    os.mkfifo(d / "pipe")
    held = os.open(d / "pipe", os.O_RDWR | os.O_NONBLOCK)
    (d / "dir").mkdir()
    (d / "dir" / "inside.txt").write_text("inside")
    (d / "dir.png").write_text("neighbour")
    (d / "mine.txt").write_text("mine")
    os.symlink("mine.txt", d / "link")
    os.symlink("nowhere.txt", d / "dangling")
    try:
        os.mknod(d / "device", stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except (PermissionError, OSError):
        pass
    yield d
    os.close(held)


TARGETS = [("pipe", "named pipe"), ("dir", "is a folder"), ("link", "symbolic link"), ("dangling", "symbolic link"),
           ("device", "is a device")]


def _need(d: Path, name: str) -> Path:
    if not os.path.lexists(d / name):
        pytest.skip(f"cannot make a {name} here")
    return d / name


# -- 1. --out and --plot never replace a device, a pipe, a folder or a link ------------------------------------------

@pytest.mark.parametrize("name,says", TARGETS)
def test_serve_cmd_out_refuses_what_is_not_a_file(hostile, capsys, name, says):
    target = _need(hostile, name)
    before = listing(hostile)
    refused(*run([*SERVE, "--out", str(target), "--force"], capsys), "--out", str(target), says)
    assert listing(hostile) == before


@pytest.mark.parametrize("name,says", TARGETS)
def test_fit_out_refuses_what_is_not_a_file(hostile, capsys, name, says):
    target = _need(hostile, name)
    before = listing(hostile)
    refused(*run([*FIT, "--out", str(target)], capsys), "--out", says)
    assert listing(hostile) == before


def test_the_system_dev_null_is_refused_by_the_check_that_precedes_every_write():
    # the check alone, which never writes: a regression of the write itself must not be able to replace the
    # system's /dev/null when the suite runs as root (the CLI cases above use a device node of their own)
    st = os.stat("/dev/null")
    with pytest.raises(UserError, match="--out /dev/null is a device"):
        profiles.check_output(Path("/dev/null"), "--out")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode) and os.stat("/dev/null").st_ino == st.st_ino


@pytest.mark.parametrize("command", [["table"], ["predict"]])
def test_plot_onto_a_folder_is_one_line_and_the_neighbour_stays(hostile, capsys, command):
    before = listing(hostile)
    refused(*run([*command, "--plot", str(hostile / "dir")], capsys), "--plot", "is a folder")
    assert listing(hostile) == before and (hostile / "dir.png").read_text() == "neighbour"


@pytest.mark.parametrize("name,says", [t for t in TARGETS if t[0] != "dir"])
def test_plot_onto_a_pipe_link_or_device_is_refused(hostile, capsys, name, says):
    target = _need(hostile, name)
    before = listing(hostile)
    refused(*run(["predict", "--plot", str(target)], capsys), "--plot", says)
    assert listing(hostile) == before


def test_plot_writes_exactly_the_named_file_never_a_neighbour(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    (tmp_path / "budget.png").write_text("neighbour")
    code, _, err = run(["predict", "--gpu", "h100", "--plot", str(tmp_path / "budget")], capsys)
    assert code == 0, err
    assert (tmp_path / "budget").read_bytes().startswith(b"\x89PNG") and (tmp_path / "budget.png").read_text() == \
        "neighbour"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["budget", "budget.png"]  # no temporary file left


def test_a_plot_format_matplotlib_cannot_draw_is_one_line(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    from vrambudget.output import plots

    ax = plots.ceiling_curves({"columns": ["a"], "rows": [{"gmu": 0.9, "ceilings": {"a": 4096}}]})
    with pytest.raises(UserError, match=r"\.xyz"):
        plots.save(ax, tmp_path / "c.xyz")
    assert list(tmp_path.iterdir()) == []


def test_a_read_only_file_is_not_replaced(tmp_path, capsys):
    if os.geteuid() == 0:
        pytest.skip("root may write any file")
    target = tmp_path / "unit.service"
    target.write_text("mine")
    target.chmod(0o444)
    refused(*run([*SERVE, "--out", str(target), "--force"], capsys), "read-only")
    assert target.read_text() == "mine"


def test_a_file_this_process_may_not_write_is_not_replaced_even_as_root(tmp_path, capsys, monkeypatch):
    target = tmp_path / "unit.service"
    target.write_text("mine")
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **k: False if str(p) == str(target) else real(p, mode, **k))
    refused(*run([*SERVE, "--out", str(target), "--force"], capsys), "read-only")
    assert target.read_text() == "mine" and [p.name for p in tmp_path.iterdir()] == ["unit.service"]


def test_a_replaced_file_keeps_its_mode_and_a_new_one_follows_the_umask(tmp_path):
    old = tmp_path / "old.txt"
    old.write_text("x")
    old.chmod(0o640)
    profiles.write_text_atomic(old, "y")
    assert old.read_text() == "y" and stat.S_IMODE(old.stat().st_mode) == 0o640
    mask = os.umask(0o022)
    try:
        profiles.write_text_atomic(tmp_path / "new.txt", "z")
    finally:
        os.umask(mask)
    assert stat.S_IMODE((tmp_path / "new.txt").stat().st_mode) == 0o644  # not mkstemp's 0600


def test_serve_cmd_out_onto_a_plain_file_still_works(tmp_path, capsys):
    target = tmp_path / "cmd.sh"
    code, out, err = run([*SERVE, "--out", str(target)], capsys)
    assert code == 0 and out == "" and "vllm serve" in target.read_text(), err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cmd.sh"]


# -- 2. a model folder with a FIFO, a folder or an unreadable file: one line, never a hang ---------------------------

def _model(tmp_path: Path) -> Path:
    m = tmp_path / "m"
    m.mkdir()
    shutil.copy(AWQ / "config.json", m / "config.json")
    return m


def _predict(m: Path) -> subprocess.CompletedProcess:
    """predict on `m` in its own process: a regression that blocks on a FIFO fails the test, not the suite."""
    return subprocess.run([sys.executable, "-c", "from vrambudget.cli import main; main()", "predict", "--gpu",
                           "h100", "--model", str(m)], capture_output=True, text=True, timeout=60, check=False)


def _one_line(r: subprocess.CompletedProcess, *says: str) -> None:
    assert r.returncode == 2 and r.stdout == "" and len(r.stderr.splitlines()) == 1, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr
    for s in says:
        assert s in r.stderr, (s, r.stderr)


def test_a_fifo_shard_is_one_line_not_a_hang(tmp_path):
    m = _model(tmp_path)
    os.mkfifo(m / "model.safetensors")
    _one_line(_predict(m), "model.safetensors", "named pipe")


def test_a_fifo_config_is_one_line_not_a_hang(tmp_path):
    m = tmp_path / "m"
    m.mkdir()
    os.mkfifo(m / "config.json")
    _one_line(_predict(m), "config.json")


def test_a_fifo_index_is_one_line_not_a_hang(tmp_path):
    m = _model(tmp_path)
    os.mkfifo(m / "model.safetensors.index.json")
    _one_line(_predict(m), "model.safetensors.index.json")


def test_a_shard_that_is_a_folder_is_one_line(tmp_path):
    from vrambudget.model.checkpoint import resolve_model

    m = _model(tmp_path)
    (m / "model-00001-of-00001.safetensors").mkdir()
    with pytest.raises(UserError, match="model-00001-of-00001.safetensors is a folder"):
        resolve_model(str(m))


def test_a_listed_shard_that_is_a_fifo_or_folder_is_named_not_called_missing(tmp_path):
    from vrambudget.model.checkpoint import resolve_model

    m = _model(tmp_path)
    (m / "model.safetensors.index.json").write_text(json.dumps(
        {"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}))
    os.mkfifo(m / "model-00002-of-00002.safetensors")
    with pytest.raises(UserError, match=r"model-00002-of-00002.safetensors \(a shard .* named pipe"):
        resolve_model(str(m))


def test_an_unreadable_shard_is_one_line(tmp_path, capsys):
    if os.geteuid() == 0:
        pytest.skip("root reads any file")
    m = _model(tmp_path)
    shard = m / "model.safetensors"
    shard.write_bytes(b"\0" * 16)
    shard.chmod(0)
    try:
        refused(*run(["predict", "--gpu", "h100", "--model", str(m)], capsys), "cannot read", "model.safetensors")
    finally:
        shard.chmod(0o644)


def test_a_shard_the_system_will_not_open_is_one_line_even_as_root(tmp_path, capsys, monkeypatch):
    m = _model(tmp_path)
    shard = m / "model.safetensors"
    shard.write_bytes(b"\0" * 16)
    real = os.open

    def denied(path, flags, *a, **k):
        if str(path) == str(shard):
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real(path, flags, *a, **k)

    monkeypatch.setattr(os, "open", denied)
    refused(*run(["predict", "--gpu", "h100", "--model", str(m)], capsys), "cannot read", "model.safetensors",
            "Permission denied")


def test_a_broken_link_shard_is_one_line(tmp_path, capsys):
    m = _model(tmp_path)
    os.symlink("blobs/gone", m / "model.safetensors")
    refused(*run(["predict", "--gpu", "h100", "--model", str(m)], capsys), "model.safetensors")


# -- 3. a full disk or a read-only target: one line, the old file intact, no temporary file --------------------------

def _no_space(*a, **k):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_disk_full_during_serve_cmd_out_keeps_the_old_file(tmp_path, capsys, monkeypatch):
    target = tmp_path / "unit.service"
    target.write_text("mine")
    monkeypatch.setattr(os, "write", _no_space)
    code, out, err = run([*SERVE, "--out", str(target), "--force"], capsys)
    monkeypatch.undo()
    refused(code, out, err, "cannot write", str(target), "full")
    assert target.read_text() == "mine" and [p.name for p in tmp_path.iterdir()] == ["unit.service"]


def test_disk_full_during_fit_keeps_the_profile(tmp_path, capsys, monkeypatch):
    out = tmp_path / "profile.json"
    assert run([*FIT, "--out", str(out)], capsys)[0] == 0
    before = listing(tmp_path)
    monkeypatch.setattr(os, "write", _no_space)
    code, o, err = run([*FIT, "--out", str(out)], capsys)
    monkeypatch.undo()
    refused(code, o, err, "cannot write", "full")
    assert listing(tmp_path) == before


def test_a_short_write_then_disk_full_leaves_no_half_file(tmp_path, monkeypatch):
    target = tmp_path / "a.txt"
    target.write_text("old")
    real = os.write
    calls = []

    def half(fd, data):
        calls.append(1)
        if len(calls) == 1:
            return real(fd, bytes(data[: len(data) // 2]))
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", half)
    with pytest.raises(UserError, match="full"):
        profiles.write_text_atomic(target, "new text " * 100)
    monkeypatch.undo()
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["a.txt"]


def test_a_read_only_file_system_is_one_line(tmp_path, monkeypatch):
    target = tmp_path / "a.txt"
    target.write_text("old")

    def erofs(*a, **k):
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(os, "replace", erofs)
    with pytest.raises(UserError, match="read-only file system"):
        profiles.write_text_atomic(target, "new")
    monkeypatch.undo()
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["a.txt"]


def test_serve_cmd_out_in_a_read_only_folder_is_one_line(tmp_path, capsys):
    if os.geteuid() == 0:
        pytest.skip("root writes any folder")
    folder = tmp_path / "ro"
    folder.mkdir()
    (folder / "unit.service").write_text("mine")
    folder.chmod(0o555)
    try:
        refused(*run([*SERVE, "--out", str(folder / "unit.service"), "--force"], capsys), "cannot write")
    finally:
        folder.chmod(0o755)
    assert [p.name for p in folder.iterdir()] == ["unit.service"] and (folder / "unit.service").read_text() == "mine"


def test_a_folder_that_refuses_the_temporary_file_is_one_line_even_as_root(tmp_path, capsys, monkeypatch):
    import tempfile

    target = tmp_path / "unit.service"
    target.write_text("mine")

    def denied(*a, **k):
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(tempfile, "mkstemp", denied)
    refused(*run([*SERVE, "--out", str(target), "--force"], capsys), "cannot write", "Permission denied",
            str(tmp_path))
    assert target.read_text() == "mine" and [p.name for p in tmp_path.iterdir()] == ["unit.service"]


def test_disk_full_while_appending_a_record_leaves_the_file_as_it_was(tmp_path, monkeypatch):
    path = tmp_path / "records.jsonl"
    records.append(path, {"n": 1})
    before = path.read_bytes()
    real = os.write

    def half(fd, data):
        real(fd, bytes(data[:5]))
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", half)
    with pytest.raises(UserError, match="full"):
        records.append(path, {"n": 2, "pad": "x" * 100})
    monkeypatch.undo()
    assert path.read_bytes() == before


# -- 4. torn records and concurrent writers ------------------------------------------------------------------------

def test_an_append_after_a_torn_line_starts_a_line_of_its_own(tmp_path, capsys):
    path = tmp_path / "records.jsonl"
    path.write_text('{"n": 1}\n{"n": 2, "outc')  # a probe killed mid-write
    records.append(path, {"n": 3})
    assert path.read_text().endswith('"outc\n{"n": 3}\n')
    assert profiles.read_jsonl(path) == [{"n": 1}, {"n": 3}]
    err = capsys.readouterr().err
    assert "line 2" in err and "torn" in err and len(err.splitlines()) == 1


def test_a_record_an_older_version_glued_onto_a_torn_line_is_recovered(tmp_path, capsys):
    path = tmp_path / "records.jsonl"
    path.write_text('{"n": 1}\n{"n": 2, "outcome": "sta{"n": 3, "x": {"y": [1, 2]}}\n{"n": 4}\n')
    assert profiles.read_jsonl(path) == [{"n": 1}, {"n": 3, "x": {"y": [1, 2]}}, {"n": 4}]
    assert "line 2" in capsys.readouterr().err


@pytest.mark.parametrize("torn", ['{"n": 2, "ok": tr', '{"n": 2, "s": "\\u00', '{"n": 2, ', '{"n": 2'])
def test_a_torn_line_in_the_middle_is_skipped_and_said(tmp_path, capsys, torn):
    path = tmp_path / "records.jsonl"
    path.write_text('{"n": 1}\n' + torn + '\n{"n": 3}\n')
    assert profiles.read_jsonl(path) == [{"n": 1}, {"n": 3}]
    assert "torn" in capsys.readouterr().err


def test_a_line_that_is_not_a_torn_record_is_still_an_error(tmp_path):
    path = tmp_path / "records.jsonl"
    path.write_text('{"n": 1}\n{broken\n{"n": 3}\n')
    with pytest.raises(UserError, match="line 2"):
        profiles.read_jsonl(path)


def test_a_records_file_that_is_a_fifo_or_folder_is_refused_for_appending(hostile):
    for name in ("pipe", "dir"):
        with pytest.raises(UserError, match="not a records file"):
            records.append(hostile / name, {"n": 1})


def _append_many(path: str, who: int) -> None:
    for i in range(50):
        records.append(Path(path), {"who": who, "i": i, "pad": "x" * (who * 500)})


def _eight_at_once(target, path: Path) -> None:
    """`target(path, who)` in 8 processes at once, each to its end."""
    import multiprocessing as mp

    procs = [mp.get_context("fork").Process(target=target, args=(str(path), w)) for w in range(8)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert all(p.exitcode == 0 for p in procs)


def test_eight_processes_appending_lose_and_tear_nothing(tmp_path):

    path = tmp_path / "records.jsonl"
    path.write_text('{"who": -1, "torn')  # and one torn line first
    _eight_at_once(_append_many, path)
    recs = profiles.read_jsonl(path)
    assert sorted((r["who"], r["i"]) for r in recs) == [(w, i) for w in range(8) for i in range(50)]


def _update_many(path: str, who: int) -> None:
    for i in range(10):
        profiles.update_json(Path(path), lambda old, i=i: (old or []) + [[who, i]])


def test_eight_processes_updating_one_json_lose_nothing(tmp_path):

    path = tmp_path / "p.json"
    _eight_at_once(_update_many, path)
    assert sorted(map(tuple, json.loads(path.read_text()))) == [(w, i) for w in range(8) for i in range(10)]
    assert [p.name for p in tmp_path.iterdir()] == ["p.json"]  # no lock or temporary file left behind


def test_eight_fits_of_one_profile_at_once_record_all_eight(tmp_path):
    srcs = []
    for i in range(8):
        srcs.append(tmp_path / f"r{i}.jsonl")
        shutil.copy(P9B, srcs[-1])
    out = tmp_path / "profile.json"
    env = {**os.environ, "VRAMBUDGET_HOME": str(tmp_path / "home")}
    procs = [subprocess.Popen([sys.executable, "-c", "from vrambudget.cli import main; main()", "fit", str(s),
                               "--gpu", "h200", "--out", str(out), "--json"], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for s in srcs]
    results = [p.communicate(timeout=120) + (p.returncode,) for p in procs]
    assert all(code == 0 for _, _, code in results), results
    profile = json.loads(out.read_text())
    assert sorted(profile["fitted_from"]) == sorted(map(str, srcs))
    assert "activation_base_bytes" in profile["coefficients"]
    assert len(json.loads((tmp_path / "profile.previous.json").read_text())["fitted_from"]) == 7
    assert not list(tmp_path.glob(".*"))  # no lock or temporary file left


def test_a_resumed_probe_never_glues_its_record_onto_a_torn_line(tmp_path, monkeypatch):
    from tests.test_probe import BASE, deployment, prober

    truth = {**BASE, "faults": {}, "state_dir": str(tmp_path / "state")}
    (tmp_path / "truth.json").write_text(json.dumps(truth))
    monkeypatch.setenv("SIMVLLM_TRUTH", str(tmp_path / "truth.json"))
    (tmp_path / "runs").mkdir()
    path = tmp_path / "runs" / "records.jsonl"
    path.write_text('{"schema": 1, "mode": "bisect", "attempt": 1, "outc')  # the earlier probe, killed
    p, _ = prober(tmp_path, deployment())
    out = p.bisect()
    recs = [r for r in profiles.read_jsonl(path) if r.get("kind") != "verify"]
    assert [r["outcome"] for r in recs] == [a["outcome"] for a in out["attempts"]]
    assert path.read_text().splitlines()[0].endswith('"outc')
