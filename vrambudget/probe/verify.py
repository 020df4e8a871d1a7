"""The probe's proof that a started server serves: real completions against it, watched through NVML and the
server's own log. A request never raises; it returns what happened (completed, out of memory, server died, never
scheduled) with the GPU memory before and at its peak."""

from __future__ import annotations

import random
import re
import subprocess
import threading
import time
import urllib.error
from typing import Any, Callable

from .server import _NO_ANSWER, GpuWatch, ServerProcess


class PeakWatch:
    """Samples GPU memory in a thread while a request runs; `peak` is the highest reading (bytes)."""

    def __init__(self, gpu: GpuWatch, every: float = 0.2):
        self.gpu, self.peak = gpu, gpu.used_bytes()
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, args=(every,), daemon=True)
        self._t.start()

    def _run(self, every: float) -> None:
        while not self._stop.wait(every):
            used = self.gpu.used_bytes()
            if used is not None and (self.peak is None or used > self.peak):
                self.peak = used

    def stop(self) -> None:
        self._stop.set()
        self._t.join(timeout=2)


_STATS = re.compile(r"Running: (\d+) reqs, Waiting: (\d+) reqs")


def stalled(log: str, seconds: float, interval: float = 10.0) -> bool:
    """vLLM's periodic stats lines (every ~10 s) show the request waiting with nothing running for
    `seconds`: it is never going to be scheduled (seen at the align-mode ceiling on vLLM 0.20.2)."""
    stats = _STATS.findall(log)
    need = max(1, int(seconds / interval))
    tail = stats[-need:]
    return len(tail) >= need and all(r == "0" and int(w) > 0 for r, w in tail)


def token_ids(n: int, seed: int, vocab: int) -> list[int]:
    """`n` prompt token ids, reproducible from `seed`, away from the vocabulary's special ends."""
    rng = random.Random(seed)
    return rng.choices(range(1000, max(1001, vocab - 1000)), k=n)


class Verifier:
    """Requests against one server at a time; `report` receives one progress line per step."""

    def __init__(self, gpu: GpuWatch, *, vocab: int, model: Callable[[], str], request_timeout: float,
                 stall_seconds: float,
                 report: Callable[[str], None]):
        self.gpu, self.vocab, self.model = gpu, vocab, model  # model: the served name when /v1/models is silent
        self.request_timeout, self.stall_seconds, self.report = request_timeout, stall_seconds, report

    def request(self, srv: ServerProcess, ids: list[int], max_tokens: int = 16) -> dict[str, Any]:
        """One completion of `ids`, watching NVML and the server log; never raises."""
        before = self.gpu.used_bytes()
        log_mark = len(srv.log_text())
        t0 = time.monotonic()
        res: dict[str, Any] = {"ok": True, "err": None, "usage": {}, "answered": True}
        model = srv.served_model() or self.model()

        def call() -> None:
            try:
                res["usage"] = srv.complete(ids, max_tokens, model, self.request_timeout).get("usage", {})
            except (*_NO_ANSWER, AttributeError) as e:  # not HTTP, not JSON, not an object
                res["ok"], res["err"] = False, f"{type(e).__name__}: {str(e)[:300]}"
                res["answered"] = isinstance(e, urllib.error.HTTPError)  # an HTTP error status: the server lives

        peak = PeakWatch(self.gpu)
        worker = threading.Thread(target=call, daemon=True)
        worker.start()
        is_stalled, said = False, 0.0
        while worker.is_alive():
            worker.join(timeout=2.0)
            if worker.is_alive() and time.monotonic() - t0 - said >= 30.0:
                said = time.monotonic() - t0
                self.report(f"    ... waiting for the answer ({said:.0f} s; a long prompt's prefill takes a while)")
            if worker.is_alive() and stalled(srv.log_text()[log_mark:], self.stall_seconds):
                is_stalled = True  # measured on vLLM 0.20.2: a request that is never scheduled waits forever
                break
        peak.stop()
        died = srv.proc is not None and srv.proc.poll() is not None
        if not res["answered"] and not died and srv.proc is not None:
            # a dropped connection is how a dying server answers: give its exit a moment to land (the race that
            # made a runtime OOM read as "server alive" one run in five)
            try:
                srv.proc.wait(timeout=2.0)
                died = True
            except subprocess.TimeoutExpired:
                pass
        oom = "out of memory" in srv.log_text()[log_mark:].lower()
        err = "request never scheduled (vLLM kept it waiting with 0 running)" if is_stalled else res["err"]
        return {"ok": res["ok"] and not died and not oom and not is_stalled, "prompt_tokens": len(ids),
                "seconds": round(time.monotonic() - t0, 1), "usage": res["usage"], "error": err, "runtime_oom": oom,
                "server_died": died, "stalled": is_stalled, "gpu_used_before": before, "gpu_used_peak": peak.peak}

    def stage(self, n: int, kind: str, srv: ServerProcess, tokens: int, max_tokens: int, seed: int) -> dict[str, Any]:
        """One request of `tokens` prompt tokens generating `max_tokens`, reported and returned as a stage."""
        what = {"first_request": "first request", "long_prompt": "one request", "after": "a request after it"}[kind]
        self.report(f"[{n}] verify: {what} of {tokens:,} prompt tokens" + (f", {max_tokens} generated"
                                                                           if max_tokens != 16 else ""))
        v = self.request(srv, token_ids(tokens, seed, self.vocab), max_tokens)
        self.report(f"[{n}] verify: {'completed' if v['ok'] else 'FAILED' + (' (runtime OOM)' if v['runtime_oom'] else '')} "
                    f"({v['seconds']:.0f} s)")
        return {"kind": kind, "max_tokens": max_tokens, **v}

    def prove(self, n: int, srv: ServerProcess, *, long_tokens: int, limit: int, first_request: tuple[int, int],
              turn_tokens: int, max_turns: int, multi_turn_seconds: float) -> dict[str, Any]:
        """Prove a started server serves, in stages, stopping at the first that fails: the first request (a short
        prompt and its generated tokens, as a user's benchmark sends it), one long prompt of `long_tokens`, a short
        request after it, then (with `turn_tokens`) a multi-turn session whose context grows by `turn_tokens` a turn
        up to `limit`, as an agent's does. A runtime OOM or a dead server fails it. The result keeps the long
        prompt's own figures at the top (what `fit` reads as growth with the prompt), names the stage that failed
        and why, and lists every stage."""
        short, gen = first_request
        plan = [("first_request", short, gen, 1), ("long_prompt", long_tokens, 16, 0), ("after", short, gen, 2)]
        stages: list[dict[str, Any]] = []
        for kind, tokens, max_tokens, seed in plan:
            stages.append(self.stage(n, kind, srv, tokens, max_tokens, seed))
            if not stages[-1]["ok"]:
                break
        if stages[-1]["ok"] and turn_tokens:
            stages.append(self.multi_turn(n, srv, step=turn_tokens, limit=limit, max_turns=max_turns,
                                          seconds=multi_turn_seconds))
        failed = next((st for st in stages if not st["ok"]), None)
        peaks = [st.get("gpu_used_peak") for st in stages] + [t.get("gpu_used_peak") for st in stages
                                                                for t in st.get("turns", [])]
        long_stage = next((st for st in stages if st["kind"] == "long_prompt"), stages[0])
        why = None
        if failed:
            why = failed.get("error") or ("out of memory" if failed.get("runtime_oom") else
                                          "the server died" if failed.get("server_died") else "failed")
        return {**{k: v for k, v in long_stage.items() if k != "kind"}, "ok": failed is None,
                "runtime_oom": any(st["runtime_oom"] for st in stages),
                "server_died": any(st["server_died"] for st in stages),
                "stalled": any(st.get("stalled") for st in stages),
                "gpu_used_before_first_request": stages[0].get("gpu_used_before"),
                "gpu_used_peak_all": max((x for x in peaks if x is not None), default=None),
                "failed_stage": failed["kind"] if failed else None, "failed_why": why, "stages": stages}

    def multi_turn(self, n: int, srv: ServerProcess, *, step: int, limit: int, max_turns: int,
                   seconds: float) -> dict[str, Any]:
        """A conversation that grows by `step` new tokens a turn (the earlier turns are its prefix) until it
        reaches `limit` tokens, `max_turns` or `seconds`."""
        convo: list[int] = []
        turns: list[dict[str, Any]] = []
        t0 = time.monotonic()
        ok = True
        while len(turns) < max_turns and time.monotonic() - t0 < seconds:
            convo = convo + token_ids(min(step, limit - len(convo)), 1000 + len(turns), self.vocab)
            r = self.request(srv, convo)
            turns.append(r)
            self.report(f"[{n}] verify turn {len(turns)}: {len(convo):,} tokens of context: "
                        f"{'ok' if r['ok'] else 'FAILED' + (' (runtime OOM)' if r['runtime_oom'] else '')} "
                        f"({r['seconds']:.0f} s)")
            if not r["ok"]:
                ok = False
                break
            if len(convo) >= limit:
                break
        return {"kind": "multi_turn", "ok": ok, "turn_tokens": step, "accumulated_tokens": len(convo),
                "turns": turns, "runtime_oom": any(t["runtime_oom"] for t in turns),
                "server_died": any(t["server_died"] for t in turns)}
