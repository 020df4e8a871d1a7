"""`vrambudget probe`: find the real ceiling with real vLLM startups, prove it with a long request,
and record every startup (one JSON line each) for `fit`.

Search (bisect mode, fixed GMU), in units of the block size:
  1. start at predict's ceiling;
  2. a startup that runs tells the exact KV memory ("Available KV cache memory"): the planner turns
     it into the next candidate; one that is refused tells vLLM's own "estimated maximum model
     length", which is the answer;
  3. the bracket [lo, hi) closes by bisection only when neither line is there.
A failure right after a cold torch.compile is retried once (first boots profile a larger peak).
"""

from __future__ import annotations

import math
import random
import re
import shlex
import sys
import time
import urllib.error
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

from .. import __version__
from ..budget import activation, features
from ..coefficients import Coefficients
from ..deployment import Deployment, gmu_flag
from ..errors import UserError
from ..logparse import LogFacts, parse_log
from ..kv.planner import ceiling_for, kv_needed_bytes
from ..predict import layout_for, min_gmu_for_context, predict
from .server import GpuWatch, MemoryBlocker, ServerProcess, free_port, port_in_use
from ..profiles import append_jsonl_atomic
from ..units import GiB

SCHEMA = 1


@dataclass
class ProbeOptions:
    vllm_cmd: list[str]
    port: int | None = None
    dummy_weights: bool = False
    startup_timeout: float = 900.0
    extra_args: list[str] = field(default_factory=list)
    runs_dir: Path = Path(".")
    verify: bool = True
    verify_fraction: float = 0.98  # prompt tokens of the verify request, as a share of the ceiling
    allow_shared_gpu: bool = False
    max_startups: int = 8
    request_timeout: float = 1800.0
    # --simulate-gpu / --free-memory: a blocker holds memory so vLLM sees this much free at start
    simulate_free_bytes: int | None = None
    real_total_bytes: int | None = None  # the real GPU's CUDA total (vLLM's GMU is a share of it)
    real_context_bytes: int = 0  # what vLLM's own CUDA context takes on the real GPU
    blocker_cmd: list[str] = field(default_factory=lambda: [sys.executable, "-m", "vrambudget.probe.blocker"])
    # multi-turn verify: each turn adds this many prompt tokens to the conversation (0 = off)
    turn_tokens: int = 0
    max_turns: int = 12
    multi_turn_seconds: float = 900.0
    stall_seconds: float = 120.0  # a request waiting unscheduled this long (vLLM's stats lines) fails the verify
    max_model_len: int | None = None  # bisect no higher than this (the context the user wants to serve)


@dataclass
class Attempt:
    n: int
    gmu: float
    max_model_len: int
    outcome: str
    seconds: float
    facts: LogFacts
    log: Path
    retry_of_cold_compile: bool = False
    verify: dict[str, Any] | None = None


def model_arg(d: Deployment) -> str:
    """What `vllm serve` is given as the model: the folder or Hub id (bundled profiles: their Hub id)."""
    src = d.model
    if src.origin in ("local", "hub"):
        return src.ref
    from ..model.checkpoint import bundled_models

    hf_id = bundled_models()[src.ref].get("hf_id")
    if not hf_id:
        raise UserError(f"bundled profile {src.ref!r} models a layout, not one checkpoint: give your checkpoint's "
                        "folder or Hugging Face id (--model for probe, --checkpoint for serve-cmd)")
    return hf_id


def simulation(card, free_memory: str | None) -> dict[str, Any]:
    """ProbeOptions for measuring `card` (a catalog GPU) on the local, bigger GPU (read through NVML)."""
    from ..hardware.catalog import detect
    from ..hardware.facts import cuda_context
    from ..units import parse_size

    real = detect()
    if real.total_bytes <= card.total_bytes:
        raise UserError(f"--simulate-gpu needs a bigger GPU than {card.name} ({card.total_gib:.2f} GiB); "
                        f"this one is {real.name} ({real.total_gib:.2f} GiB)")
    free = parse_size(free_memory) if free_memory else card.total_bytes - cuda_context(card).value
    return {"simulate_free_bytes": free, "real_total_bytes": real.total_bytes,
            "real_context_bytes": cuda_context(real).value}


def simulated_gmu(card_total: int, gmu: float, real_total: int) -> str:
    """The GMU to pass on the real GPU so that vLLM's budget ceil(real_total x g) equals the simulated
    card's ceil(card_total x gmu) (to a few bytes), as vLLM parses it (a float)."""
    return repr(math.ceil(card_total * gmu) / real_total)


def serve_args(d: Deployment, gmu: float, max_model_len: int, *, dummy: bool, port: int | None,
               extra: list[str], real_total: int | None = None) -> list[str]:
    """vLLM flags for one startup (vLLM's own names; JSON given as one argument). With `real_total`
    (a simulated card), the GMU is rewritten so vLLM's budget is the simulated card's."""
    args = [model_arg(d), *d.with_(gmu=gmu).serve_flags(max_model_len)]
    if real_total:
        args[args.index("--gpu-memory-utilization") + 1] = simulated_gmu(d.gpu.total_bytes, gmu, real_total)
    if port is not None:
        args += ["--port", str(port)]
    if dummy:
        args += ["--load-format", "dummy"]
    return args + extra


class _PeakWatch:
    """Samples GPU memory in a thread while a request runs; `peak` is the highest reading (bytes)."""

    def __init__(self, gpu: GpuWatch, every: float = 0.2):
        import threading

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


def _stalled(log: str, seconds: float, interval: float = 10.0) -> bool:
    """vLLM's periodic stats lines (every ~10 s) show the request waiting with nothing running for
    `seconds`: it is never going to be scheduled (seen at the align-mode ceiling on vLLM 0.20.2)."""
    stats = _STATS.findall(log)
    need = max(1, int(seconds / interval))
    tail = stats[-need:]
    return len(tail) >= need and all(r == "0" and int(w) > 0 for r, w in tail)


class _Exhausted(Exception):
    """--max-startups reached: the search stops and reports what it has."""


class Prober:
    """Runs startups one at a time; `report` receives one progress line per event."""

    def __init__(self, d: Deployment, c: Coefficients, opts: ProbeOptions, report: Callable[[str], None] = print):
        self.d, self.c, self.opts, self.report = d, c, opts, report
        self.gpu = GpuWatch()
        self.attempts: list[Attempt] = []
        self.records_path = opts.runs_dir / "records.jsonl"
        self.layout = layout_for(d)
        self.block = self.layout.block_size
        self._baseline: int | None = None
        self._earlier_logs = len(list(opts.runs_dir.glob("startup-*.log")))  # a runs dir used before
        self.blocker: MemoryBlocker | None = None

    # -- a smaller card on a bigger GPU ------------------------------------------------------
    def simulate(self) -> None:
        """Start the blocker so that vLLM's first snapshot sees `simulate_free_bytes` free: it must
        also leave room for vLLM's own CUDA context on the real GPU."""
        o = self.opts
        if o.simulate_free_bytes is None:
            return
        target = o.simulate_free_bytes + o.real_context_bytes
        self.blocker = MemoryBlocker(target, o.blocker_cmd)
        free = self.blocker.start()
        self.report(f"simulating {self.d.gpu.name}: a blocker (pid {self.blocker.pid}) holds the GPU down to "
                    f"{free / GiB:.2f} GiB free; vLLM's context takes ~{o.real_context_bytes / GiB:.2f} GiB of it, "
                    f"leaving {o.simulate_free_bytes / GiB:.2f} GiB as on that card")

    def close(self) -> None:
        if self.blocker is not None:
            self.blocker.stop()
            self.blocker = None

    # -- one startup -------------------------------------------------------------------------
    def _preflight(self) -> int:
        port = self.opts.port or free_port()
        if port_in_use(port):
            raise UserError(f"port {port} is in use; pick another with --port (or leave it out for a free one)")
        others = self.gpu.other_processes({self.blocker.pid} if self.blocker and self.blocker.pid else set())
        if others and not self.opts.allow_shared_gpu:
            raise UserError(f"other processes hold the GPU (pids {', '.join(map(str, others))}); stop them or "
                            "pass --allow-shared-gpu (their memory then counts against the budget)")
        return port

    def startup(self, gmu: float, mml: int, *, keep: bool = False) -> tuple[Attempt, ServerProcess | None]:
        port = self._preflight()
        n = len(self.attempts) + 1
        if n > self.opts.max_startups:
            raise _Exhausted()
        self._baseline = self.gpu.used_bytes()
        log = self.opts.runs_dir / f"startup-{n + self._earlier_logs:02d}.log"  # never overwrite a log
        cmd = self.opts.vllm_cmd + serve_args(self.d, gmu, mml, dummy=self.opts.dummy_weights, port=port,
                                              extra=self.opts.extra_args,
                                              real_total=self.opts.real_total_bytes if self.blocker else None)
        srv = ServerProcess(cmd, log, port, env={"VLLM_LOGGING_LEVEL": "DEBUG", "PYTHONUNBUFFERED": "1"})
        label = f"[{n}] max_model_len {mml:,}"
        self.report(f"{label} @ GMU {gmu_flag(gmu)}: starting ({shlex.join(cmd[:3])} ...)")
        srv.start()
        next_tick = [60.0]

        def tick(elapsed: float) -> None:
            if elapsed >= next_tick[0]:
                next_tick[0] += 60.0
                self.report(f"{label}: still starting ({elapsed:.0f} s; a first Qwen3.5 boot JIT-compiles "
                            "kernels for minutes)")

        res = srv.wait_ready(self.opts.startup_timeout, tick)
        facts = parse_log(srv.log_text())
        if res.state == "ready":
            outcome = "started"
        elif res.state == "timeout":
            outcome = "timed_out"
        else:
            outcome = facts.outcome if facts.outcome not in ("started", "unknown", "incomplete") else "crashed"
        att = Attempt(n, gmu, mml, outcome, round(res.seconds, 1), facts, log)
        self.report(f"{label} @ GMU {gmu_flag(gmu)}: {outcome} ({res.seconds:.0f} s)" + self._detail(facts))
        if outcome == "started" and keep:
            return att, srv
        srv.stop()
        self._release()
        return att, None

    def _release(self) -> None:
        """After stopping a server: wait until NVML shows the memory it held is back."""
        if not self.gpu.wait_released(self._baseline):
            self.report("warning: GPU memory did not come back within 120 s after stopping the server")

    @staticmethod
    def _detail(f: LogFacts) -> str:
        bits = []
        if f.available_kv_gib is not None:
            bits.append(f"KV {f.available_kv_gib:.2f} GiB")
        if f.estimated_max_model_len:
            bits.append(f"vLLM estimate {f.estimated_max_model_len:,}")
        if f.max_model_len and f.auto_fit_to:
            bits.append(f"auto-fit {f.auto_fit_to:,}")
        return f" [{', '.join(bits)}]" if bits else ""

    def record(self, att: Attempt, mode: str) -> None:
        self.attempts.append(att)
        d = self.d.with_(gmu=att.gmu, max_model_len=max(att.max_model_len, 1), auto_fit=False,
                         compile_cache=att.facts.compile or self.d.compile_cache)
        pred = predict(d, self.c)
        rec = {
            "schema": SCHEMA, "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "tool": f"vrambudget {__version__}",
            "mode": mode, "attempt": att.n, "outcome": att.outcome, "seconds": att.seconds,
            "retry_of_cold_compile": att.retry_of_cold_compile,
            "inputs": {**self.d.inputs(), "gpu_memory_utilization": att.gmu, "max_model_len": att.max_model_len},
            "vllm_version": att.facts.vllm_version, "driver_version": self.gpu.driver,
            "gpu_name": self.gpu.name or self.d.gpu.name, "gpu_key": self.d.gpu.key,
            "features": asdict(features(d)), "facts": att.facts.to_dict(), "log": str(att.log),
            "predicted": {"available_kv_bytes": pred.budget.available_kv_bytes, "ceiling": pred.ceiling,
                          "activation_bytes": pred.budget.activation_bytes},
            "verify": att.verify,
            "simulated": ({"free_bytes": self.opts.simulate_free_bytes, "real_total_bytes": self.opts.real_total_bytes,
                           "real_context_bytes": self.opts.real_context_bytes} if self.blocker else None),
        }
        append_jsonl_atomic(self.records_path, rec)

    def run_startup(self, gmu: float, mml: int, mode: str, keep: bool = False) -> tuple[Attempt, ServerProcess | None]:
        """A startup, recorded. A failure right after a cold torch.compile (the first boot of a new
        compile-cache key profiles a larger peak) gets one recorded retry, which boots warm."""
        att, srv = self.startup(gmu, mml, keep=keep)
        self.record(att, mode)
        cold_fail = att.outcome not in ("started", "insufficient_free_memory", "timed_out") and \
            att.facts.compile == "cold"
        if cold_fail:
            self.report(f"[{att.n}] failed right after a cold torch.compile: retrying once with the cache warm")
            att, srv = self.startup(gmu, mml, keep=keep)
            att.retry_of_cold_compile = True
            self.record(att, mode)
        return att, srv

    # -- verification ------------------------------------------------------------------------
    def _request(self, srv: ServerProcess, ids: list[int]) -> dict[str, Any]:
        """One completion of `ids`, watching NVML and the server log; never raises."""
        import threading

        before = self.gpu.used_bytes()
        log_mark = len(srv.log_text())
        t0 = time.monotonic()
        res: dict[str, Any] = {"ok": True, "err": None, "usage": {}}
        model = srv.served_model() or model_arg(self.d)

        def call() -> None:
            try:
                res["usage"] = srv.complete(ids, 16, model, self.opts.request_timeout).get("usage", {})
            except (urllib.error.URLError, OSError, ValueError) as e:
                res["ok"], res["err"] = False, str(e)[:300]

        peak = _PeakWatch(self.gpu)
        worker = threading.Thread(target=call, daemon=True)
        worker.start()
        stalled = False
        while worker.is_alive():
            worker.join(timeout=2.0)
            if worker.is_alive() and _stalled(srv.log_text()[log_mark:], self.opts.stall_seconds):
                stalled = True  # measured on vLLM 0.20.2: a request that is never scheduled waits forever
                break
        peak.stop()
        died = srv.proc is not None and srv.proc.poll() is not None
        oom = "out of memory" in srv.log_text()[log_mark:].lower()
        err = "request never scheduled (vLLM kept it waiting with 0 running)" if stalled else res["err"]
        return {"ok": res["ok"] and not died and not oom and not stalled, "prompt_tokens": len(ids),
                "seconds": round(time.monotonic() - t0, 1), "usage": res["usage"], "error": err, "runtime_oom": oom,
                "server_died": died, "stalled": stalled, "gpu_used_before": before, "gpu_used_peak": peak.peak}

    def _ids(self, n: int, seed: int) -> list[int]:
        vocab = self.d.model.arch.vocab_size
        rng = random.Random(seed)
        return [rng.randrange(1000, max(1001, vocab - 1000)) for _ in range(n)]

    def verify(self, att: Attempt, srv: ServerProcess) -> bool:
        """Prove the length serves: one long prompt of about `max_model_len` tokens, then (with
        `turn_tokens`) a multi-turn session whose context grows by `turn_tokens` a turn, as an agent's
        does, bounded in turns and time. A runtime OOM or a dead server fails it."""
        n = max(1, int(att.max_model_len * self.opts.verify_fraction) - 16)
        self.report(f"[{att.n}] verify: one request of {n:,} prompt tokens")
        v = self._request(srv, self._ids(n, 0))
        self.report(f"[{att.n}] verify: {'completed' if v['ok'] else 'FAILED' + (' (runtime OOM)' if v['runtime_oom'] else '')} "
                    f"({v['seconds']:.0f} s)")
        att.verify = {**v, "stages": [{"kind": "long_prompt", **v}]}
        if v["ok"] and self.opts.turn_tokens:
            turns = self.multi_turn(att, srv)
            att.verify["stages"].append(turns)
            att.verify["ok"] = turns["ok"]
            for k in ("runtime_oom", "server_died"):
                att.verify[k] = att.verify[k] or turns[k]
            peaks = [t["gpu_used_peak"] for t in turns["turns"] if t["gpu_used_peak"] is not None]
            if peaks and att.verify["gpu_used_peak"] is not None:
                att.verify["gpu_used_peak"] = max(att.verify["gpu_used_peak"], *peaks)
        return bool(att.verify["ok"])

    def multi_turn(self, att: Attempt, srv: ServerProcess) -> dict[str, Any]:
        """A conversation that grows by `turn_tokens` new tokens a turn (the earlier turns are its
        prefix) until it reaches the verify length, `max_turns` or `multi_turn_seconds`."""
        step, limit = self.opts.turn_tokens, int(att.max_model_len * self.opts.verify_fraction) - 16
        convo: list[int] = []
        turns: list[dict[str, Any]] = []
        t0 = time.monotonic()
        ok = True
        while len(turns) < self.opts.max_turns and time.monotonic() - t0 < self.opts.multi_turn_seconds:
            convo = convo + self._ids(min(step, limit - len(convo)), 1000 + len(turns))
            r = self._request(srv, convo)
            turns.append(r)
            self.report(f"[{att.n}] verify turn {len(turns)}: {len(convo):,} tokens of context: "
                        f"{'ok' if r['ok'] else 'FAILED' + (' (runtime OOM)' if r['runtime_oom'] else '')} ({r['seconds']:.0f} s)")
            if not r["ok"]:
                ok = False
                break
            if len(convo) >= limit:
                break
        return {"kind": "multi_turn", "ok": ok, "turn_tokens": step, "accumulated_tokens": len(convo),
                "turns": turns, "runtime_oom": any(t["runtime_oom"] for t in turns),
                "server_died": any(t["server_died"] for t in turns)}

    # -- searches ----------------------------------------------------------------------------
    def _round(self, tokens: int) -> int:
        return max(self.block, tokens // self.block * self.block)

    def _from_available(self, f: LogFacts) -> int | None:
        """The ceiling the planner gives for the log's available KV memory (vLLM's exact arithmetic).
        After a cold compile the same length boots warm next time, with the cold-minus-warm
        profiling peak (from the coefficients) more KV memory: that warm ceiling is returned."""
        if f.available_kv_gib is None:
            return None
        gap = 0.0
        if f.compile == "cold" and not self.d.enforce_eager:
            feats = features(self.d)
            gap = activation(feats, self.c) - activation(replace(feats, compile_cache="warm"), self.c)
        c = ceiling_for(self.layout, round(f.available_kv_gib * GiB + gap), self.d.rules)
        return min(c, self.d.model.arch.max_position_embeddings)

    def bisect(self) -> dict[str, Any]:
        """Largest max_model_len that starts (and serves, with --verify) at the deployment's GMU."""
        try:
            self.simulate()
            return self._bisect()
        except _Exhausted:
            return self._summary("bisect", failed="max_startups_reached")
        finally:
            self.close()

    def target(self, tokens: int) -> dict[str, Any]:
        """Smallest GMU (0.01 steps) at which `tokens` start and serve."""
        try:
            self.simulate()
            return self._target(tokens)
        except _Exhausted:
            return self._summary("target", failed="max_startups_reached", tokens=tokens)
        finally:
            self.close()

    def _bisect(self) -> dict[str, Any]:
        """Invariant: `lo` started, `hi` did not start or did not serve (exclusive bound)."""
        gmu, max_len, b = self.d.gmu, self.d.model.arch.max_position_embeddings, self.block
        if self.opts.max_model_len:
            max_len = min(max_len, self.opts.max_model_len)
        runtime_ooms: list[float] = []  # GMUs at which a length started but a request ran out of memory
        # graph mode: every new max_model_len is a new compile-cache key, so its first boot is cold and
        # a cold failure is retried warm; aim at the warm ceiling from the start
        start = self.d if self.d.enforce_eager else self.d.with_(compile_cache="warm")
        predicted = predict(start.with_(auto_fit=True), self.c).ceiling
        lo, hi = 0, max_len + 1
        served = 0  # largest length verified to serve
        serve_failed = False  # after a runtime OOM every started candidate is verified
        cand = self._round(predicted) if predicted else b
        while True:
            cand = max(b, min(cand, max_len, max_len if hi > max_len else self._round(hi - 1)))
            att, srv = self.run_startup(gmu, cand, "bisect", keep=self.opts.verify)
            f = att.facts
            if att.outcome == "started":
                exact = self._from_available(f)
                final = serve_failed or cand >= max_len or cand + b >= hi or (exact is not None and exact <= cand)
                if not final:
                    if srv is not None:
                        srv.stop()
                        self._release()
                    lo = cand
                    cand = exact if exact is not None and exact > cand else self._mid(lo, hi)
                    continue
                if srv is not None:
                    ok = self.verify(att, srv)
                    srv.stop()
                    self._release()
                    self._rewrite_verify(att)
                    oom = not ok and self._runtime_oom(att)
                    if oom:
                        runtime_ooms.append(gmu)
                    lower = self._serving_gmu(gmu, att) if oom else None
                    if lower is not None:
                        # it started, then ran out of memory outside the budget, as predicted for this GMU:
                        # a lower GMU leaves more room (a length-bound OOM lowers the length below)
                        self.report(f"[{att.n}] runtime OOM at GMU {gmu:.2f} (a startup-only probe would have "
                                    f"certified it); trying GMU {lower:.2f}, the highest predicted to serve")
                        gmu, lo, hi, served, serve_failed = lower, 0, max_len + 1, 0, False
                        continue
                    if not ok:  # it starts but does not serve: the ceiling is lower
                        serve_failed, hi = True, cand
                        nxt = self._mid(served, hi) if served else self._round(int(cand * 0.9))
                        if nxt <= served:
                            return self._summary("bisect", ceiling=served, predicted=predicted, bracket=[served, hi])
                        cand = nxt
                        continue
                served = lo = cand
                if serve_failed and cand + b < hi:
                    cand = self._mid(cand, hi)
                    if cand > served:
                        continue
                return self._summary("bisect", ceiling=served, predicted=predicted, bracket=[served, hi],
                                     gmu=gmu, runtime_oom_gmus=runtime_ooms)
            if att.outcome == "kv_too_small":
                hi = min(hi, cand)
                est = f.estimated_max_model_len
                if est is not None:
                    hi = min(hi, est + 1)
                nxt = est if est is not None and est > lo else self._mid(lo, hi)
                if lo and nxt <= lo:
                    cand = lo  # bracket closed on a length that started but was not verified
                    hi = lo + 1 if self.opts.verify else hi
                    if not self.opts.verify:
                        return self._summary("bisect", ceiling=lo, predicted=predicted, bracket=[lo, hi])
                    continue
                cand = nxt
                continue
            return self._summary("bisect", failed=att, predicted=predicted)

    @staticmethod
    def _runtime_oom(att: Attempt) -> bool:
        v = att.verify or {}
        return bool(v.get("runtime_oom") or v.get("server_died")) and not v.get("stalled")

    def _serving_gmu(self, gmu: float, att: Attempt) -> float | None:
        """After a runtime OOM at `gmu`: predict's highest GMU that serves the verify prompt, when it is
        lower than `gmu` (the OOM is the margin's); None when the model says `gmu` should have served."""
        n = int(att.max_model_len * self.opts.verify_fraction)
        p = predict(self.d.with_(gmu=gmu, max_model_len=att.max_model_len, auto_fit=False), self.c,
                    prompt_tokens=n)
        g = p.max_serving_gmu
        return g if g is not None and 0.05 <= g < gmu else None

    def _mid(self, lo: int, hi: int) -> int:
        return self._round(lo + (hi - lo) // 2) if hi - lo > self.block else lo

    def _rewrite_verify(self, att: Attempt) -> None:
        """The verify result belongs to the startup's record: append it as its own line."""
        rec = {"schema": SCHEMA, "kind": "verify", "attempt": att.n, "max_model_len": att.max_model_len,
               "gmu": att.gmu, "verify": att.verify, "log": str(att.log),
               "inputs": {**self.d.inputs(), "gpu_memory_utilization": att.gmu, "max_model_len": att.max_model_len}}
        append_jsonl_atomic(self.records_path, rec)

    def _target(self, tokens: int) -> dict[str, Any]:
        """Invariant: `ok_g` started and served `tokens`; `bad_g` did not. GMU moves in 0.01 steps, by
        as many steps as the logged KV memory says are missing (or spare)."""
        total = self.d.gpu.total_bytes
        need = kv_needed_bytes(self.layout, tokens, self.d.rules)
        g = min_gmu_for_context(self.d.with_(max_model_len=tokens, auto_fit=False), self.c, tokens) or 0.99
        ok_g: float | None = None
        bad_g: float | None = None

        def steps(nbytes: float) -> float:  # GMU change (0.01 steps, at least one) worth `nbytes`
            return max(1, math.ceil(nbytes / total * 100 - 1e-9)) / 100

        while 0.01 <= g <= 0.99 and (ok_g is None or g < ok_g) and (bad_g is None or g > bad_g):
            att, srv = self.run_startup(g, tokens, "target", keep=self.opts.verify)
            f = att.facts
            if att.outcome == "started":
                served = True
                if srv is not None:
                    served = self.verify(att, srv)
                    srv.stop()
                    self._release()
                    self._rewrite_verify(att)
                if not served and self._runtime_oom(att):
                    # a higher GMU leaves even less room outside the budget: no GMU serves these tokens
                    return self._summary("target", failed="runtime_oom", tokens=tokens, runtime_oom_gmus=[g])
                if not served:  # started, but the request was never scheduled: more KV cache
                    bad_g, g = g, round(g + 0.01, 2)
                    continue
                ok_g = g
                slack = f.available_kv_gib * GiB - need if f.available_kv_gib is not None else 0.0
                g = round(g - (steps(slack) if slack > 0.01 * total else 0.01), 2)
            elif att.outcome == "kv_too_small":
                bad_g = g
                short = (f.needed_kv_gib - f.available_kv_gib) * GiB \
                    if f.needed_kv_gib is not None and f.available_kv_gib is not None else 0.0
                g = round(g + steps(short), 2)
            else:
                return self._summary("target", failed=att, tokens=tokens)
        return self._summary("target", min_gmu=ok_g, tokens=tokens)

    def _summary(self, mode: str, **kw: Any) -> dict[str, Any]:
        return {"mode": mode, "startups": len(self.attempts), "records": str(self.records_path),
                "attempts": [{"n": a.n, "gmu": a.gmu, "max_model_len": a.max_model_len, "outcome": a.outcome,
                              "seconds": a.seconds, "verify": (a.verify or {}).get("ok")} for a in self.attempts],
                **{k: (v.outcome if isinstance(v, Attempt) else v) for k, v in kw.items()}}
