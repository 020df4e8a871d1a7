"""The probe's process handling: start one `vllm serve` in its own process group, watch its log, stop it and
everything it started (its group, and its tree wherever it went: reaper.py), and watch GPU memory through NVML
(no torch needed)."""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..errors import UserError
from . import reaper


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def port_in_use(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0


class GpuWatch:
    """GPU memory through NVML, of one device or of an engine's several (their sum, the union of their processes);
    when NVML is missing, every reading is None and waits are skipped. NVML's indices are taken as CUDA's (the
    default CUDA_DEVICE_ORDER may differ: set CUDA_DEVICE_ORDER=PCI_BUS_ID where a machine mixes cards)."""

    def __init__(self, index: int | tuple[int, ...] = 0):
        self.indices = (index,) if isinstance(index, int) else tuple(index)
        self.index = self.indices[0]
        self.available = False
        self.driver: str | None = None
        self.name: str | None = None
        self.names: list[str] = []
        try:
            import pynvml

            pynvml.nvmlInit()
            self._nvml = pynvml
            self._hs = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in self.indices]
            self._h = self._hs[0]
            drv = pynvml.nvmlSystemGetDriverVersion()
            self.driver = drv.decode() if isinstance(drv, bytes) else drv
            self.names = [n.decode() if isinstance(n, bytes) else n for n in map(pynvml.nvmlDeviceGetName, self._hs)]
            self.name = self.names[0]
            self.available = True
        except Exception:  # no driver / no library / fewer devices: the probe still runs, without memory watching
            self.available = False

    def used_bytes(self) -> int | None:
        """Memory used on the watched devices, summed."""
        if not self.available:
            return None
        return sum(int(self._nvml.nvmlDeviceGetMemoryInfo(h).used) for h in self._hs)

    def total_bytes(self) -> int | None:
        """NVML's total of the first device (nvidia-smi's; a little above what CUDA reports)."""
        if not self.available:
            return None
        return int(self._nvml.nvmlDeviceGetMemoryInfo(self._h).total)

    def other_processes(self, own_pids: set[int] = frozenset()) -> list[int]:
        """PIDs of compute processes on the watched devices that are not ours."""
        if not self.available:
            return []
        pids: set[int] = set()
        for h in self._hs:
            try:
                pids.update(p.pid for p in self._nvml.nvmlDeviceGetComputeRunningProcesses(h))
            except Exception:
                continue
        return sorted(pids - set(own_pids))

    def wait_released(self, baseline: int | None, *, tolerance: int = 512 << 20, timeout: float = 120.0,
                      poll: float = 1.0) -> bool:
        """Wait until used memory is back within `tolerance` a device of `baseline` (bytes), reading every `poll` s."""
        if not self.available or baseline is None:
            return True
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            used = self.used_bytes()
            if used is not None and used <= baseline + tolerance * len(self._hs):
                return True
            if reaper.hurry.is_set():  # a signal during the cleanup: no waiting
                return False
            time.sleep(poll)
        return False


def engine_devices(workers: int, env: dict[str, str] | None = None) -> tuple[int, ...]:
    """The NVML indices of the GPUs vLLM's workers take: the first `workers` of CUDA_VISIBLE_DEVICES where it lists
    indices, else 0 .. workers - 1."""
    visible = (env if env is not None else os.environ).get("CUDA_VISIBLE_DEVICES", "").strip()
    if not visible:
        return tuple(range(workers))
    try:
        listed = [int(x) for x in visible.split(",") if x.strip()]
    except ValueError:
        raise UserError(f"CUDA_VISIBLE_DEVICES={visible!r}: the probe reads GPU indices (0,1,...), not UUIDs") from None
    if len(listed) < workers:
        raise UserError(f"CUDA_VISIBLE_DEVICES={visible!r} shows {len(listed)} GPU(s); the deployment has {workers} "
                        "workers, one GPU each")
    return tuple(listed[:workers])


@dataclass
class StartResult:
    state: str  # "ready", "exited", "timeout"
    seconds: float
    returncode: int | None


# what a port may answer when it is not (yet) vLLM's server: refused, reset, not HTTP, bad JSON, a timeout
_NO_ANSWER = (urllib.error.URLError, OSError, ValueError, http.client.HTTPException)


class ServerProcess:
    """One vLLM server: its own session/process group, its log file (created exclusively: never another's), its
    port, its reaper tag in the environment (VRAMBUDGET_PROBE_TOKEN: every process it starts carries it).
    `poll`: seconds between checks while waiting for it."""

    def __init__(self, cmd: list[str], log_path: Path, port: int, env: dict[str, str] | None = None,
                 poll: float = 0.5):
        self.cmd, self.log_path, self.port, self.poll = cmd, log_path, port, poll
        self.env = {**os.environ, **(env or {})}
        self.proc: subprocess.Popen[bytes] | None = None
        self.tag: str | None = None
        self._start_time: int | None = None

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "xb")  # FileExistsError: the caller picks the next name
        try:
            with reaper.signals_deferred():  # a signal now comes once `proc` is set, so `stop` finds it
                self.tag = reaper.shared().track()
                self.proc = subprocess.Popen(self.cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                             env={**self.env, reaper.VAR: self.tag}, start_new_session=True)
                self._start_time = reaper.start_time(self.proc.pid)
                reaper.shared().watch(self.proc.pid, self.proc.pid)
        except FileNotFoundError:
            self._release()
            raise UserError(f"cannot run {self.cmd[0]!r}: is vLLM installed here? (--vllm-cmd)") from None
        except BaseException:
            if self.proc is None:
                self._release()
            raise
        finally:
            log.close()

    def _release(self) -> None:
        if self.tag is not None:
            self.tag = None
            reaper.shared().release()

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def log_tail(self, since: int, overlap: int = 256) -> tuple[str, int]:
        """(the log from byte `since` less `overlap`, so a line cut at the last read is whole, and the new end)."""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(max(0, since - overlap))
                data = f.read()
        except FileNotFoundError:
            return "", since
        return data.decode(errors="replace"), max(0, since - overlap) + len(data)

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=2) as r:
                return r.status == 200
        except _NO_ANSWER:
            return False

    def wait_ready(self, timeout: float, tick: Callable[[float], None] | None = None) -> StartResult:
        """Until /health answers, the process exits, or `timeout` seconds pass."""
        assert self.proc is not None
        t0 = time.monotonic()
        while True:
            elapsed = time.monotonic() - t0
            rc = self.proc.poll()
            if rc is not None:
                return StartResult("exited", elapsed, rc)
            if self.healthy():
                return StartResult("ready", elapsed, None)
            if elapsed > timeout:
                return StartResult("timeout", elapsed, None)
            if tick:
                tick(elapsed)
            time.sleep(self.poll)

    def stop(self, grace: float = 30.0) -> None:
        """SIGTERM the server's process group and every process it started (its tag: also those that left the
        group), then SIGKILL what is left after `grace` (at once on a signal meanwhile: reaper.signals_deferred);
        returns when all are gone. Safe to call twice."""
        if self.proc is None or self.tag is None:
            return
        with reaper.signals_deferred():
            roots = {self.proc.pid: self._start_time} if self._start_time is not None else {}
            group = self.proc.pid if self.proc.returncode is None else None  # start_new_session: pgid == pid
            what = reaper.needle(self.tag)
            gone = reaper.terminate(lambda: reaper.scan(what, roots, group), grace=grace, poll=min(self.poll, 0.1),
                                    group=group, root=self.proc)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:  # unkillable (uninterruptible sleep): the supervisor keeps watching
                return
            if gone:
                self._release()

    def complete(self, prompt_ids: list[int], max_tokens: int, model: str, timeout: float) -> dict:
        """One OpenAI-compatible completion from token ids (no tokenizer needed)."""
        body = json.dumps({"model": model, "prompt": prompt_ids, "max_tokens": max_tokens,
                           "temperature": 0, "ignore_eos": True}).encode()
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}/v1/completions", data=body,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return json.loads(r.read())

    def served_model(self) -> str | None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/v1/models", timeout=5) as r:
                data = json.loads(r.read())
            return str(data["data"][0]["id"])
        except (*_NO_ANSWER, KeyError, IndexError, TypeError):
            return None


class MemoryBlocker:
    """A helper process (`vrambudget.probe.blocker`) that holds GPU memory so that free memory falls to
    `target_free` bytes. It stays in the probe's own process group and carries a reaper tag, so it ends with
    the probe however the probe ends (it also exits when its stdin closes); `stop` ends it explicitly (stdin
    closed, then SIGTERM, then SIGKILL)."""

    def __init__(self, target_free: int, cmd: list[str], device: int = 0):
        self.target_free, self.cmd, self.device = target_free, cmd, device
        self.proc: subprocess.Popen[str] | None = None
        self.free: int | None = None
        self.tag: str | None = None
        self._start_time: int | None = None

    def start(self, timeout: float = 180.0) -> int:
        """Start it and wait for `READY <free> <total>`; returns the free bytes it left."""
        with reaper.signals_deferred():
            self.tag = reaper.shared().track()
            try:
                self.proc = subprocess.Popen([*self.cmd, str(self.target_free), str(self.device)],
                                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                             text=True, env={**os.environ, reaper.VAR: self.tag})
            except BaseException:
                self.tag = None
                reaper.shared().release()
                raise
            self._start_time = reaper.start_time(self.proc.pid)
            reaper.shared().watch(self.proc.pid)
        assert self.proc.stdout is not None
        end = time.monotonic() + timeout
        lines: list[str] = []
        while time.monotonic() < end:
            line = self.proc.stdout.readline()
            if not line:
                break
            lines.append(line.strip())
            if line.startswith("READY "):
                self.free = int(line.split()[1])
                return self.free
        self.stop()
        raise UserError(f"the memory blocker did not start ({'; '.join(lines[-3:]) or 'no output'}); it needs torch "
                        "and a free GPU")

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def stop(self, grace: float = 20.0) -> None:
        if self.proc is None or self.tag is None:
            return
        with reaper.signals_deferred():
            try:
                if self.proc.stdin:
                    self.proc.stdin.close()
            except OSError:
                pass
            roots = {self.proc.pid: self._start_time} if self._start_time is not None else {}
            what = reaper.needle(self.tag)
            gone = reaper.terminate(lambda: reaper.scan(what, roots), grace=grace, root=self.proc)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                return
            if self.proc.stdout:
                self.proc.stdout.close()
            if gone:
                self.tag = None
                reaper.shared().release()
