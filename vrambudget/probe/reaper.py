"""Ending everything the probe started, on every path: its own stop, a signal during that stop, a crash, and a
SIGKILL of the probe itself (when nothing in it runs).

Every process the probe starts (a vLLM server, the memory blocker) carries VRAMBUDGET_PROBE_TOKEN=<generation>.<n>
in its environment. Its descendants inherit it, so it finds them after setsid()/setpgid() and after they are
re-parented; those that clear their environment are found as descendants (/proc/*/stat ppid) while their parent
lives. Only such processes are ever signalled: the probe ends what it started, nothing else.

While anything is tracked, a supervisor (this file run as a script: stdlib only, in its own session) holds the
read end of a pipe from the probe. When the probe dies (EOF, the probe's pidfd, or its own re-parenting) it
SIGTERMs every process of its generation, then SIGKILLs what is left after a grace period. Without /proc it
degrades to process groups: the probe's killpg, and the groups the supervisor was told of.
"""

from __future__ import annotations

import atexit
import os
import select
import signal
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from typing import Callable, Iterator

VAR = "VRAMBUDGET_PROBE_TOKEN"
PROC = os.path.isdir("/proc/self")
_STOPS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


# -- /proc ------------------------------------------------------------------------------------------
def _stat(pid: int) -> tuple[str, int, int, int] | None:
    """(state, ppid, pgrp, start time) of `pid`, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    fields = data[data.rfind(b")") + 2:].split()
    try:
        return fields[0].decode(), int(fields[1]), int(fields[2]), int(fields[19])
    except (IndexError, ValueError):
        return None


def start_time(pid: int) -> int | None:
    s = _stat(pid)
    return s[3] if s else None


def needle(tag: str, *, prefix: bool = False) -> bytes:
    """What `scan` looks for in an environment: exactly `tag`, or (prefix) any tag beginning with it."""
    return f"\0{VAR}={tag}".encode() + (b"" if prefix else b"\0")


def _carries(pid: int, what: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return what in b"\0" + f.read() + b"\0"
    except OSError:
        return False


def scan(what: bytes, roots: dict[int, int] | None = None, pgrp: int | None = None) -> dict[int, int]:
    """Running processes (not zombies, never this one) that carry `what` in their environment, are one of `roots`
    (pid: start time), are in process group `pgrp`, or descend from any of these: pid -> start time."""
    if not PROC:
        return {}
    procs: dict[int, tuple[str, int, int, int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit() and (s := _stat(int(name))) is not None:
            procs[int(name)] = s
    roots = roots or {}
    hit = {pid for pid, (_, _, grp, t) in procs.items()
           if roots.get(pid) == t or grp == pgrp or (what and _carries(pid, what))}
    children: dict[int, list[int]] = {}
    for pid, (_, ppid, _, _) in procs.items():
        children.setdefault(ppid, []).append(pid)
    stack = list(hit)
    while stack:
        for c in children.get(stack.pop(), ()):
            if c not in hit:
                hit.add(c)
                stack.append(c)
    me = os.getpid()
    return {pid: procs[pid][3] for pid in hit if procs[pid][0] not in ("Z", "X") and pid != me}


def _send(pid: int, t: int, sig: int) -> None:
    """Signal `pid` if it is still the process that started at `t` (a pidfd, where there is one, closes the race
    with a reused pid)."""
    fd = None
    try:
        fd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        pass
    try:
        if start_time(pid) != t:
            return
        if fd is not None:
            signal.pidfd_send_signal(fd, sig)
        else:
            os.kill(pid, sig)
    except OSError:  # gone meanwhile, or not ours to signal
        pass
    finally:
        if fd is not None:
            os.close(fd)


def _killpg(pgid: int | None, sig: int) -> bool:
    """Signal group `pgid`; whether it exists."""
    if pgid is None:
        return False
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# -- ending a tree --------------------------------------------------------------------------------
hurry = threading.Event()  # set while a signal arrived during a cleanup: grace periods end at once


def terminate(find: Callable[[], dict[int, int]], *, grace: float, poll: float = 0.05, kill_wait: float = 10.0,
              group: int | None = None, root: subprocess.Popen | None = None) -> bool:
    """SIGTERM what `find()` returns (and process group `group`), SIGKILL what is left after `grace` s (at once
    once `hurry` is set), again on every look until nothing is left; whether all is gone. `root` (our child) is
    reaped by the caller only, so its pid, and the group named after it, stay its own meanwhile; without /proc it
    and `group` are all that is looked at."""

    def left() -> dict[int, int]:
        procs = find()
        if not PROC:
            if root is not None and root.poll() is None:
                procs[root.pid] = 0
            if _killpg(group, 0):
                procs[-1] = 0
        return procs

    def send(procs: dict[int, int], sig: int) -> None:
        _killpg(group, sig)
        for pid, t in procs.items():
            if PROC:
                _send(pid, t, sig)
        if not PROC and root is not None and root.poll() is None:
            root.send_signal(sig)

    procs = left()
    if procs and not hurry.is_set():
        send(procs, signal.SIGTERM)
        end = time.monotonic() + grace
        while procs and time.monotonic() < end and not hurry.is_set():
            time.sleep(poll)
            procs = left()
    end = time.monotonic() + kill_wait
    while procs:
        send(procs, signal.SIGKILL)
        if time.monotonic() >= end:
            return False
        time.sleep(poll)
        procs = left()
    return True


_depth = 0


@contextmanager
def signals_deferred() -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP while this runs do not cut a cleanup short: they set `hurry` (what waits out a
    grace period kills at once) and the first of them is delivered when the outermost such block ends. In the
    main thread only (signals are handled there); elsewhere a plain block."""
    global _depth
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    if _depth:
        _depth += 1
        try:
            yield
        finally:
            _depth -= 1
        return
    got: list[int] = []

    def note(sig: int, _frame: object) -> None:
        got.append(sig)
        hurry.set()

    old = {}
    _depth = 1
    try:
        for sig in _STOPS:
            old[sig] = signal.signal(sig, note)
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, signal.SIG_DFL if handler is None else handler)
        _depth = 0
        hurry.clear()
        if got:
            handler = old.get(got[0])
            if callable(handler):
                handler(got[0], None)
            elif handler in (signal.SIG_DFL, None):
                os.kill(os.getpid(), got[0])


# -- the supervisor ---------------------------------------------------------------------------------
class Reaper:
    """The probe's side of the supervisor. `track` gives each process to start its tag (put it in the process's
    environment as VAR) and starts a supervisor if none runs; `watch` tells it the started pid; `release` says a
    tracked process and its tree are gone: with none left the supervisor is told so and exits. Each supervisor
    watches its own generation of tags, so one that is exiting never touches the next one's."""

    def __init__(self, grace: float = 5.0):
        self.grace = grace
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._gen = ""
        self._count = self._n = 0
        self._roots: list[str] = []
        self._done: list[subprocess.Popen[bytes]] = []
        self._pid = os.getpid()

    def track(self) -> str:
        with self._lock:
            if self._pid != os.getpid():  # a forked child: the supervisor is its parent's
                self._proc, self._count, self._done, self._pid = None, 0, [], os.getpid()
            self._done = [p for p in self._done if p.poll() is None]
            if self._count == 0:
                self._gen, self._roots = os.urandom(8).hex(), []
            self._count += 1
            self._n += 1
            if self._proc is None or self._proc.poll() is not None:
                self._spawn()
            return f"{self._gen}.{self._n}"

    def watch(self, pid: int, pgid: int | None = None) -> None:
        with self._lock:
            self._roots.append(f"P {pid} {start_time(pid) or 0} {pgid or 0}\n")
            self._tell(self._roots[-1])

    def release(self) -> None:
        with self._lock:
            self._count = max(0, self._count - 1)
            proc = self._proc
            if self._count or proc is None:
                return
            self._tell("Q\n")
            try:
                if proc.stdin is not None:
                    proc.stdin.close()
            except OSError:
                pass
            self._done.append(proc)
            self._proc = None

    def _spawn(self) -> None:
        if not sys.executable:
            self._proc = None
            return
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-I", "-S", os.path.abspath(__file__), str(os.getpid()), self._gen, str(self.grace)],
                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        except OSError:  # no supervisor: the probe's own stops still end what it started
            self._proc = None
            return
        for line in self._roots:
            self._tell(line)

    def _tell(self, line: str) -> None:
        if self._proc is None or self._proc.stdin is None:
            return
        try:
            self._proc.stdin.write(line.encode())
            self._proc.stdin.flush()
        except (BrokenPipeError, ValueError, OSError):  # it died: the next track starts another, told the same roots
            self._done.append(self._proc)
            self._proc = None


    def wait_done(self, timeout: float = 2.0) -> None:
        """Wait for released supervisors to finish (at exit: the probe leaves no process behind it)."""
        end = time.monotonic() + timeout
        for proc in self._done:
            try:
                proc.wait(timeout=max(0.0, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass


_shared = Reaper()
atexit.register(_shared.wait_done)


def shared() -> Reaper:
    """The process's reaper (one supervisor a probe process at most)."""
    return _shared


def supervise(probe: int, gen: str, grace: float) -> None:
    """The supervisor: until the probe closes the pipe or dies, learn its trees; then end every process of
    generation `gen` (after the probe's own release only one pass, with nothing expected left)."""
    for sig in (signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    what = needle(gen + ".", prefix=True)
    known: dict[int, int] = {}
    groups: set[int] = set()
    released = False
    try:
        pidfd: int | None = os.pidfd_open(probe)
    except ProcessLookupError:
        return _sweep(what, known, groups, grace)
    except (AttributeError, OSError):
        pidfd = None
    buf = b""
    while os.getppid() == probe:
        ready, _, _ = select.select([0] + ([pidfd] if pidfd is not None else []), [], [], 1.0)
        if pidfd is not None and pidfd in ready:
            break
        if 0 in ready:
            data = os.read(0, 4096)
            if not data:
                break
            buf += data
            *lines, buf = buf.split(b"\n")
            for line in lines:
                parts = line.split()
                if parts[:1] == [b"P"] and len(parts) == 4:
                    known[int(parts[1])] = int(parts[2])
                    if int(parts[3]):
                        groups.add(int(parts[3]))
                elif parts == [b"Q"]:
                    released = True
        known.update(scan(what, known))  # remember the trees: a child that clears its environment stays known
    if released:
        terminate(lambda: scan(what, known), grace=0, kill_wait=1.0)
    else:
        _sweep(what, known, groups, grace)


def _sweep(what: bytes, known: dict[int, int], groups: set[int], grace: float) -> None:
    """The probe died: end its generation, then look again a while for a child it was starting."""
    if not PROC:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for g in groups:
                _killpg(g, sig)
            time.sleep(grace if sig == signal.SIGTERM else 0)
        return
    end = time.monotonic() + 0.5
    while True:
        terminate(lambda: scan(what, known), grace=grace)
        if time.monotonic() >= end:
            return
        time.sleep(0.1)


if __name__ == "__main__":
    supervise(int(sys.argv[1]), sys.argv[2], float(sys.argv[3]))
