"""`vrambudget probe`: find the real ceiling with real vLLM startups, prove it with real requests, and record
every startup (one JSON line each) for `fit`. The searches themselves are pure (`search.py`); this module runs
the startups they ask for: the server process (`server.py`), the verification (`verify.py`), the records
(`records.py`) and, for a simulated smaller card, the memory blocker. A failure right after a cold torch.compile
is retried once (first boots profile a larger peak)."""

from __future__ import annotations

import math
import shlex
import sys
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterator

from ..budget import features

from ..activation import activation
from ..coefficients import Coefficients
from ..deployment import Deployment, gmu_flag
from ..errors import UserError
from ..kv.planner import ceiling_for, kv_needed_bytes
from ..logparse import LogFacts, parse_log
from ..parallel import deciding, ranks, several, stage_deployment
from ..prediction import fit_max_num_seqs, layout_for, min_gmu_for_context, predict
from ..units import GiB
from . import phases, records, search
from .server import GpuWatch, MemoryBlocker, ServerProcess, engine_devices, free_port, port_in_use
from .verify import Verifier, stalled

_stalled = stalled  # the name tests import


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
    # let vLLM fit the length itself (--max-model-len auto) where the version keeps the compile-cache key: the
    # ceiling after a restart in 2 startups (search.auto_fit); False: fixed lengths only (search.bisect)
    auto_fit: bool = True
    # the first request, as a user's benchmark sends it (a short prompt, 250 tokens generated): FlashInfer allocates
    # its workspaces there, outside vLLM's budget; then the long prompt (None: verify_fraction x the length)
    first_request: tuple[int, int] = (200, 250)
    prompt_tokens: int | None = None
    poll_seconds: float = 0.5  # between checks of a starting server (health, exit) and of GPU memory
    stop_grace: float = 30.0  # SIGTERM, then this long before SIGKILL
    release_timeout: float = 120.0  # how long to wait for the GPU memory after a server stopped

    def __post_init__(self) -> None:
        from ..inputs import positive_seconds

        if not self.vllm_cmd:
            raise UserError("--vllm-cmd is empty: give the command that starts vLLM's server (vllm serve)")
        for name in ("startup_timeout", "request_timeout", "stall_seconds", "poll_seconds", "stop_grace",
                     "release_timeout", "multi_turn_seconds"):
            positive_seconds(getattr(self, name), "--" + name.replace("_", "-"))
        if not 0 < self.verify_fraction <= 1:
            raise UserError(f"verify fraction {self.verify_fraction!r}: give a share above 0, at most 1")
        if self.max_startups < 1 or self.max_turns < 1 or self.turn_tokens < 0:
            raise UserError("--max-startups and --max-turns take 1 or more, --turn-tokens 0 or more")
        if self.runs_dir.exists() and not self.runs_dir.is_dir():
            raise UserError(f"--runs-dir {self.runs_dir}: that is a file; give a folder (new or a probe's)")
        if self.port is not None and not 1 <= self.port <= 65535:
            raise UserError(f"--port {self.port}: a TCP port is 1 to 65535")


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
    retry_of_mamba_blocks: bool = False
    verify: dict[str, Any] | None = None


def model_arg(d: Deployment) -> str:
    """What the probe gives `vllm serve` as the model: it needs a real checkpoint, not a layout's placeholder."""
    from ..output.servecmd import model_argument

    m = model_argument(d)
    if m.placeholder:
        raise UserError(f"bundled profile {d.model.ref!r} models a layout, not one checkpoint: give your checkpoint's "
                        "folder or Hugging Face id with --model to probe it")
    return m.value


def simulation(card, free_memory: str | None) -> tuple[dict[str, Any], Any]:
    """ProbeOptions for measuring `card` (a catalog GPU) on the local, bigger GPU (read through NVML), and what runs:
    the card's memory on that GPU's chip (hardware.catalog.simulated)."""
    from ..hardware.catalog import detect, simulated
    from ..hardware.facts import cuda_context
    from ..units import parse_size

    real = detect(engine_devices(1)[0])  # the GPU vLLM will take (the first of CUDA_VISIBLE_DEVICES)
    runs = simulated(card, real, "--simulate-gpu (this machine's GPU)")
    free = parse_size(free_memory, "--free-memory") if free_memory else card.total_bytes - cuda_context(card).value
    return {"simulate_free_bytes": free, "real_total_bytes": real.total_bytes,
            "real_context_bytes": cuda_context(real).value}, runs


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


def warm_ceiling(d: Deployment, c: Coefficients, layout, f: LogFacts) -> int | None:
    """The ceiling the planner gives for a log's available KV memory (vLLM's exact arithmetic). After a cold
    compile the same length boots warm next time, with the cold-minus-warm profiling peak (from the coefficients)
    more KV memory: that warm ceiling is returned."""
    if f.available_kv_gib is None:
        return None
    gap = 0.0
    if f.compile == "cold" and not d.enforce_eager:
        feats = features(d)
        gap = activation(feats, c) - activation(replace(feats, compile_cache="warm"), c)
    return min(ceiling_for(layout, round(f.available_kv_gib * GiB + gap), d.rules), d.model.arch.max_position_embeddings)


class _Exhausted(Exception):
    """--max-startups reached: the search stops and reports what it has."""


class Prober:
    """Runs the startups a search asks for, one at a time; `report` receives one progress line per event."""

    def __init__(self, d: Deployment, c: Coefficients, opts: ProbeOptions, report: Callable[[str], None] = print):
        self.c, self.opts, self.report = c, opts, report
        # vLLM's default max_num_seqs that its Mamba-block check would refuse is lowered up front (said once)
        self.seqs_asked = d.max_num_seqs
        self.d = fit_max_num_seqs(d, c)
        if self.d.max_num_seqs != d.max_num_seqs:
            report(f"--max-num-seqs {self.d.max_num_seqs}: vLLM's default {d.max_num_seqs} exceeds the KV cache "
                   "blocks predicted for this hybrid model, and its CUDA graphs need one per sequence")
        self.workers = d.tp * d.pp * d.dp  # one GPU each: the probe watches them all
        self.gpu = GpuWatch(engine_devices(self.workers))  # CUDA_VISIBLE_DEVICES's GPUs, as vLLM takes them
        self.attempts: list[Attempt] = []
        self.records_path = opts.runs_dir / "records.jsonl"
        self.layout = layout_for(d)
        self._baseline: int | None = None
        self.blocker: MemoryBlocker | None = None
        self.live: list[ServerProcess] = []  # servers started and not yet stopped: every exit path stops them
        self._phase_seconds: dict[str, tuple[dict[str, float], int]] = {}  # kind -> (phase seconds, startup n)
        self.verifier = Verifier(self.gpu, vocab=d.model.arch.vocab_size, model=lambda: model_arg(d),
                                 request_timeout=opts.request_timeout, stall_seconds=opts.stall_seconds, report=report)

    # -- the searches ---------------------------------------------------------------------------
    def bisect(self) -> dict[str, Any]:
        """Largest max_model_len that starts (and serves, with --verify) at the deployment's GMU."""
        max_len = min(self.d.model.arch.max_position_embeddings, self.opts.max_model_len or 1 << 62)
        # graph mode: every new max_model_len is a new compile-cache key, so its first boot is cold and a cold
        # failure is retried warm; aim at the warm ceiling from the start
        start = self.d if self.d.enforce_eager else self.d.with_(compile_cache="warm")
        predicted = deciding(start.with_(auto_fit=True), self.c).ceiling  # several workers: the fewest blocks

        def fixed(hi: int | None = None, guess: int = predicted) -> dict[str, Any]:
            return search.bisect(
                self._trial("bisect"), gmu=self.d.gmu, block=self.layout.block_size, max_len=min(max_len, hi or max_len),
                predicted=guess, verify=self.opts.verify, serving_gmu=self._serving_gmu, report=self.report)

        if not (self.opts.auto_fit and self.d.rules.auto_fit_keeps_compile_key):
            return self._run("bisect", fixed)

        def auto_then_fixed() -> dict[str, Any]:
            found = search.auto_fit(self._trial("auto"), gmu=self.d.gmu, graphs=not self.d.enforce_eager,
                                    cap=max_len, report=self.report)
            if "fallback" not in found:
                return {**found, "predicted": predicted, "gmu": self.d.gmu}
            hi = found.get("hi")
            self.report(f"{found['fallback']}: searching fixed lengths" + (f" below {hi:,}" if hi else ""))
            return {**fixed(hi, min(hi or predicted, predicted)), "strategy": "auto-fit, then fixed lengths"}

        return self._run("bisect", auto_then_fixed)

    def target(self, tokens: int) -> dict[str, Any]:
        """Smallest GMU (0.01 steps) at which `tokens` start and serve."""
        g = min_gmu_for_context(self.d.with_(max_model_len=tokens, auto_fit=False), self.c, tokens) or 0.99
        return self._run("target", lambda: search.target(
            self._trial("target"), tokens=tokens, start_gmu=g, need_bytes=kv_needed_bytes(self.layout, tokens,
                                                                                        self.d.rules),
            total_bytes=self.d.gpu.total_bytes), tokens=tokens)

    def _run(self, mode: str, go: Callable[[], dict[str, Any]], **on_exhausted: Any) -> dict[str, Any]:
        """Run a search as a supervisor: an exception, Ctrl-C, SIGTERM or SIGHUP stops every server this probe
        started (its whole process group) and the blocker, and waits for their GPU memory, before it propagates."""
        with _signals_raise(), claim(self.opts.runs_dir):
            try:
                self.simulate()
                found = go()
            except _Exhausted:
                found = {**on_exhausted, "failed": "max_startups_reached"}
            finally:
                self.close()
        return {"mode": mode, "startups": len(self.attempts), "records": str(self.records_path),
                "max_num_seqs": self.d.max_num_seqs, "max_num_seqs_asked": self.seqs_asked,
                "attempts": [{"n": a.n, "gmu": a.gmu, "max_model_len": a.max_model_len, "started_len": _started_len(a),
                              "compile": a.facts.compile, "outcome": a.outcome, "seconds": a.seconds,
                              "verify": (a.verify or {}).get("ok"), "why": _why(a)} for a in self.attempts],
                **found}

    def _trial(self, mode: str) -> search.TrialFn:
        """The searches' callback: start (kept running while it may be verified), verify when asked, stop."""
        def trial(gmu: float, mml: int, verify_if: Callable[[int | None], bool]) -> search.Trial:
            att, srv = self.run_startup(gmu, mml, mode, keep=self.opts.verify)
            f = att.facts
            exact = self._exact_ceiling(f) if att.outcome == "started" else None
            verified = None
            if srv is not None:
                if verify_if(exact):
                    verified = self.verify(att, srv)
                self._stop(srv)
                if verified is not None:
                    records.append(self.records_path, records.verify_record(
                        n=att.n, gmu=att.gmu, max_model_len=_started_len(att) or att.max_model_len, verify=att.verify or {},
                        log=att.log, inputs=self.d.inputs()))
            v = att.verify or {}
            return search.Trial(att.n, att.outcome, exact, f.estimated_max_model_len,
                                f.available_kv_gib * GiB if f.available_kv_gib is not None else None,
                                f.needed_kv_gib * GiB if f.needed_kv_gib is not None else None, verified,
                                bool(v.get("runtime_oom") or v.get("server_died")) and not v.get("stalled"),
                                started_len=_started_len(att), compile=f.compile)
        return trial

    def _exact_ceiling(self, f: LogFacts) -> int | None:
        """The ceiling a started log proves: from its available KV memory on one worker (warm_ceiling); with several
        workers the engine's KV cache tokens (every worker gets the fewest blocks any has), which the log states."""
        if not several(self.d):
            return warm_ceiling(self.d, self.c, self.layout, f)
        if not f.kv_cache_tokens:
            return None
        return min(f.kv_cache_tokens // self.layout.block_size * self.layout.block_size,
                   self.d.model.arch.max_position_embeddings)

    def _serving_gmu(self, gmu: float, mml: int) -> float | None:
        """After a runtime OOM at `gmu`: predict's highest GMU that serves the verify prompt, when it is lower
        than `gmu` (the OOM is the margin's); None when the model says `gmu` should have served."""
        n = int(mml * self.opts.verify_fraction)
        p = predict(self.d.with_(gmu=gmu, max_model_len=mml, auto_fit=False), self.c, prompt_tokens=n)
        g = p.max_serving_gmu
        return g if g is not None and 0.05 <= g < gmu else None

    # -- one startup ----------------------------------------------------------------------------
    def simulate(self) -> None:
        """Start the blocker so that vLLM's first snapshot sees `simulate_free_bytes` free: it must also leave
        room for vLLM's own CUDA context on the real GPU."""
        o = self.opts
        if o.simulate_free_bytes is None:
            return
        self.blocker = MemoryBlocker(o.simulate_free_bytes + o.real_context_bytes, o.blocker_cmd)
        free = self.blocker.start()
        self.report(f"simulating {self.d.gpu.name}: a blocker (pid {self.blocker.pid}) holds the GPU down to "
                    f"{free / GiB:.2f} GiB free; vLLM's context takes ~{o.real_context_bytes / GiB:.2f} GiB of it, "
                    f"leaving {o.simulate_free_bytes / GiB:.2f} GiB as on that card")

    def close(self) -> None:
        """Stop what this probe started and is still running (servers, then the blocker); a signal while it does
        (a second Ctrl-C or SIGTERM) hurries it, SIGKILL at once, and is raised once it completed."""
        from .reaper import signals_deferred

        with signals_deferred():
            for srv in list(self.live):
                self._stop(srv)
            if self.blocker is not None:
                self.blocker.stop()
                self.blocker = None

    def _stop(self, srv: ServerProcess) -> None:
        srv.stop(self.opts.stop_grace)
        if srv in self.live:
            self.live.remove(srv)
        self._release()

    def _preflight(self) -> int:
        port = self.opts.port or free_port()
        if port_in_use(port):
            raise UserError(f"port {port} is in use; pick another with --port (or leave it out for a free one)")
        others = self.gpu.other_processes({self.blocker.pid} if self.blocker and self.blocker.pid else set())
        if others and not self.opts.allow_shared_gpu:
            raise UserError(f"other processes hold the GPU (pids {', '.join(map(str, others))}); stop them or "
                            "pass --allow-shared-gpu (their memory then counts against the budget)")
        return port

    def _clock(self, retry: bool) -> phases.PhaseClock:
        """A phase clock for the next startup, expecting what the last of its kind here took, else the lab's."""
        kind = phases.kind(self.d.enforce_eager, "warm" if retry else self.d.compile_cache)
        expected, source = phases.prior(kind)
        if kind in self._phase_seconds:
            mine, n = self._phase_seconds[kind]
            rest = "" if set(expected) <= set(mine) else "; the phases it did not reach as the lab's"
            expected, source = {**expected, **mine}, f"as startup {n} took{rest}"
        return phases.PhaseClock(expected, source, eager=self.d.enforce_eager, kind=kind)

    def startup(self, gmu: float, mml: int, *, keep: bool = False,
                retry: bool = False) -> tuple[Attempt, ServerProcess | None]:
        port = self._preflight()
        n = len(self.attempts) + 1
        if n > self.opts.max_startups:
            raise _Exhausted()
        self._baseline = self.gpu.used_bytes()
        cmd = self.opts.vllm_cmd + serve_args(self.d, gmu, mml, dummy=self.opts.dummy_weights, port=port,
                                              extra=self.opts.extra_args,
                                              real_total=self.opts.real_total_bytes if self.blocker else None)
        label = f"[{n}] max_model_len {'auto' if mml == search.AUTO else f'{mml:,}'}"
        self.report(f"{label} @ GMU {gmu_flag(gmu)}: starting ({shlex.join(cmd[:3])} ...)")
        srv = self._start(cmd, port)
        clock = self._clock(retry)
        last = {"report": 0.0, "end": 0}

        def tick(elapsed: float) -> None:
            text, last["end"] = srv.log_tail(last["end"])
            if clock.update(text, elapsed) or elapsed - last["report"] >= 60.0:
                last["report"] = elapsed
                self.report(f"{label}: {clock.line(elapsed)}")

        res = srv.wait_ready(self.opts.startup_timeout, tick)
        facts = parse_log(srv.log_text())
        outcome = {"ready": "started", "timeout": "timed_out"}.get(res.state) or (
            facts.outcome if facts.outcome not in ("started", "unknown", "incomplete") else "crashed")
        att = Attempt(n, gmu, mml, outcome, round(res.seconds, 1), facts, srv.log_path)
        clock.update(srv.log_tail(last["end"])[0], res.seconds)  # the lines written after the last tick
        took = clock.seconds(res.seconds)
        # a started server went through every phase (one passed between two reads took ~0 s)
        took = {**dict.fromkeys(clock.expected, 0.0), **took} if outcome == "started" else phases.partial(took)
        self._phase_seconds[clock.kind] = (took, n)
        self.report(f"{label} @ GMU {gmu_flag(gmu)}: {outcome} ({res.seconds:.0f} s)" + _detail(facts))
        if outcome == "started" and keep:
            return att, srv
        self._stop(srv)
        return att, None

    def _start(self, cmd: list[str], port: int) -> ServerProcess:
        """Start a server logging to the next free startup-NN.log (created exclusively: an earlier log, or one
        another process just made, is never overwritten), tracked in `live` from the moment it exists."""
        n = len(list(self.opts.runs_dir.glob("startup-*.log"))) + 1
        while True:
            srv = ServerProcess(cmd, self.opts.runs_dir / f"startup-{n:02d}.log", port, poll=self.opts.poll_seconds,
                                env={"VLLM_LOGGING_LEVEL": "DEBUG", "PYTHONUNBUFFERED": "1"})
            try:
                self.live.append(srv)
                srv.start()
                return srv
            except FileExistsError:
                self.live.remove(srv)
                n += 1

    def _release(self) -> None:
        """After stopping a server: wait until NVML shows the memory it held is back."""
        if not self.gpu.wait_released(self._baseline, timeout=self.opts.release_timeout, poll=self.opts.poll_seconds):
            self.report(f"warning: GPU memory did not come back within {self.opts.release_timeout:.0f} s after "
                        "stopping the server")

    def record(self, att: Attempt, mode: str) -> None:
        self.attempts.append(att)
        auto = att.max_model_len == search.AUTO
        d = self.d.with_(gmu=att.gmu, max_model_len=self.d.model.arch.max_position_embeddings if auto else
                         max(att.max_model_len, 1), auto_fit=auto,
                         compile_cache=att.facts.compile or self.d.compile_cache)
        o = self.opts
        sim = ({"free_bytes": o.simulate_free_bytes, "real_total_bytes": o.real_total_bytes,
                "real_context_bytes": o.real_context_bytes} if self.blocker else None)
        if several(d):  # the log's budget lines are its first worker's (PP0 TP0): that worker's share and plan
            d = stage_deployment(d, ranks(d, d.pp)[0], d.pp)
        records.append(self.records_path, records.startup_record(
            d=d, predicted=predict(d, self.c), mode=mode, n=att.n, outcome=att.outcome, seconds=att.seconds,
            retry_of_cold_compile=att.retry_of_cold_compile, retry_of_mamba_blocks=att.retry_of_mamba_blocks,
            facts=att.facts, log=att.log, gmu=att.gmu,
            max_model_len=att.max_model_len, inputs=self.d.inputs(), gpu_key=self.d.gpu.key,
            gpu_name=self.gpu.name or self.d.gpu.name, driver=self.gpu.driver, simulated=sim, verify=att.verify))

    def run_startup(self, gmu: float, mml: int, mode: str, keep: bool = False) -> tuple[Attempt, ServerProcess | None]:
        """A startup, recorded. A refusal by vLLM's Mamba-block check is retried with the max_num_seqs it names;
        a failure right after a cold torch.compile (the first boot of a new compile-cache key profiles a larger
        peak) gets one recorded retry, which boots warm."""
        att, srv = self.startup(gmu, mml, keep=keep)
        self.record(att, mode)
        cold_retried = False
        while True:
            if att.outcome == "mamba_blocks" and 0 < (att.facts.mamba_blocks or 0) < self.d.max_num_seqs:
                # vLLM's Mamba-block check named the blocks its KV cache has: that many seqs from now on (the
                # number only falls, so this ends)
                seqs = att.facts.mamba_blocks
                self.report(f"[{att.n}] vLLM refused max_num_seqs {self.d.max_num_seqs} (its CUDA graphs need one KV "
                            f"cache block a sequence, it has {seqs}): retrying with --max-num-seqs {seqs}")
                self.d = self.d.with_(max_num_seqs=seqs, max_num_seqs_given=True)
                att, srv = self.startup(gmu, mml, keep=keep, retry=True)
                att.retry_of_mamba_blocks = True
            elif (not cold_retried and att.facts.compile == "cold"
                  and att.outcome not in ("started", "insufficient_free_memory", "timed_out", "mamba_blocks")):
                self.report(f"[{att.n}] failed right after a cold torch.compile: retrying once with the cache warm")
                cold_retried = True
                att, srv = self.startup(gmu, mml, keep=keep, retry=True)
                att.retry_of_cold_compile = True
            else:
                return att, srv
            self.record(att, mode)

    # -- verification ---------------------------------------------------------------------------
    def verify(self, att: Attempt, srv: ServerProcess) -> bool:
        """Prove the length serves, in stages (verify.Verifier.prove); the record names the stage that failed."""
        o = self.opts
        length = _started_len(att) or att.max_model_len
        if o.max_model_len:  # the length asked for, where vLLM fitted a longer one
            length = min(length, o.max_model_len)
        limit = max(1, int(length * o.verify_fraction) - 16)
        att.verify = self.verifier.prove(att.n, srv, long_tokens=min(o.prompt_tokens or limit, limit), limit=limit,
                                         first_request=o.first_request, turn_tokens=o.turn_tokens,
                                         max_turns=o.max_turns, multi_turn_seconds=o.multi_turn_seconds)
        return bool(att.verify["ok"])


def _started_len(att: Attempt) -> int | None:
    """The max_model_len a started server runs with: the one asked for, or vLLM's own fit under auto (-1)."""
    if att.outcome != "started":
        return None
    return att.facts.max_model_len if att.max_model_len == search.AUTO else att.max_model_len


def _why(a: Attempt) -> str:
    """Why this startup ran, in a few words (the probe's table)."""
    if a.retry_of_mamba_blocks:
        return "the max_num_seqs vLLM's Mamba-block check named"
    if a.retry_of_cold_compile:
        return "the same length again, compile cache warm"
    if a.max_model_len == search.AUTO:
        if a.facts.compile == "warm":
            return ("the same again: warm, fits the ceiling after a restart" if a.n > 1 else
                    "vLLM fits the length (its compiled graphs already cached: the ceiling after a restart)")
        return {"cold": "vLLM fits the length (first boot: cold compile)"}.get(a.facts.compile or "",
                                                                               "vLLM fits the length (eager)")
    return "a length from the last startup's KV memory" if a.n > 1 else "the predicted ceiling"


def _detail(f: LogFacts) -> str:
    bits = []
    if f.available_kv_gib is not None:
        bits.append(f"KV {f.available_kv_gib:.2f} GiB")
    if f.estimated_max_model_len:
        bits.append(f"vLLM estimate {f.estimated_max_model_len:,}")
    if f.max_model_len and f.auto_fit_to:
        bits.append(f"auto-fit {f.auto_fit_to:,}")
    return f" [{', '.join(bits)}]" if bits else ""


class Interrupted(KeyboardInterrupt):
    """SIGTERM or SIGHUP during a probe: raised like Ctrl-C so every cleanup runs."""


@contextmanager
def _signals_raise() -> Iterator[None]:
    """While a probe runs, SIGTERM and SIGHUP raise Interrupted (Ctrl-C raises KeyboardInterrupt already), so
    the supervisor's cleanup runs on every way a user or a scheduler ends it (in the main thread only)."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def raise_(signum: int, _frame: Any) -> None:
        raise Interrupted(signal.Signals(signum).name)

    old = {sig: signal.signal(sig, raise_) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)


@contextmanager
def claim(runs_dir: Path) -> Iterator[None]:
    """Hold the runs folder for this probe alone (an advisory lock on runs_dir/.probe.lock, released by the kernel
    if the probe dies): a second probe on the same folder is refused instead of interleaving its startups."""
    import fcntl
    import os

    try:
        runs_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(runs_dir / ".probe.lock", os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as e:
        raise UserError(f"--runs-dir {runs_dir}: cannot use that folder ({e.strerror}); give a folder you can "
                        "write") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            other = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            raise UserError(f"another probe (pid {other}) is using --runs-dir {runs_dir}; wait for it or give "
                            "another folder") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        yield
    finally:
        os.close(fd)
