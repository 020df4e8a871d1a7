"""Where a vLLM startup is, read from its own log lines, and how long the rest should take.

A startup goes through PHASES in order; each begins at the first log line that names it (MARKERS, as vLLM
0.20-0.26 print them). The probe reports each phase as it begins, with the elapsed time and an estimate of what
is left: from this session's earlier startups when there are some, else from the lab's measured startups
(PRIOR_SECONDS, each with the log it comes from)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime

PHASES = ("starting", "loading weights", "compiling", "profiling", "allocating the KV cache", "capturing graphs",
          "starting the API server", "ready")

# (text in a vLLM log line, the phase it begins); a later marker moves the phase on, never back. With CUDA graphs
# torch.compile runs between the weights and the profile run; eager goes straight to profiling (EAGER_MARKERS).
MARKERS = (
    ("Initializing a V1 LLM engine", "loading weights"),
    ("Loading weights on", "loading weights"),
    ("Model loading took", "compiling"),
    ("torch.compile took", "profiling"),
    ("Available KV cache memory", "allocating the KV cache"),
    ("Capturing CUDA graphs", "capturing graphs"),
    ("init engine (profile, create kv cache, warmup model) took", "starting the API server"),
    ("Application startup complete", "ready"),
)

# Seconds each phase took in the lab's measured startups on an H100 with vLLM 0.20.2, dummy weights, as
# phase_seconds reads them from these logs under tests/fixtures/lab-vllm-0.20.2-h100/ (tests/test_probe_phases.py
# checks every figure against its log). A first estimate only: real weights load from disk, another card, model or
# version takes other times, and the probe uses its own earlier startups' times as soon as it has one.
PRIOR_SECONDS: dict[str, tuple[dict[str, float], tuple[str, ...]]] = {
    # Qwen3.5-9B AWQ, CUDA graphs, a cold compile and Triton JIT; its startup stopped after profiling (max_model_len
    # too long), so the phases after it are the warm restart's (startup-02)
    "graphs-cold": ({"starting": 45, "loading weights": 6, "compiling": 65, "profiling": 158,
                     "allocating the KV cache": 1, "capturing graphs": 4, "starting the API server": 1},
                    ("outside/triton-graphs/startup-01.log", "outside/triton-graphs/startup-02.log")),
    "graphs-warm": ({"starting": 45, "loading weights": 6, "compiling": 8, "profiling": 8,
                     "allocating the KV cache": 1, "capturing graphs": 4, "starting the API server": 1},
                    ("outside/triton-graphs/startup-02.log",)),
    # compiled before, the Triton cache gone: the kernels JIT-compile inside the profile run
    "graphs-warm-jit": ({"starting": 47, "loading weights": 6, "compiling": 7, "profiling": 132,
                         "allocating the KV cache": 1, "capturing graphs": 4, "starting the API server": 1},
                        ("outside/triton-warm-jit/startup-01.log",)),
    # Qwen3.5-9B bf16, eager, FP8 KV
    "eager": ({"starting": 30, "loading weights": 8, "profiling": 7, "allocating the KV cache": 8,
               "starting the API server": 0}, ("p4/startup-01.log",)),
}

EAGER_MARKERS = tuple((m, "profiling" if p == "compiling" else p) for m, p in MARKERS)

_STAMP = re.compile(r"(?:INFO|DEBUG|WARNING|ERROR) (\d\d-\d\d \d\d:\d\d:\d\d) ")


def phase_of(text: str, current: str = "starting", eager: bool = False) -> str:
    """The phase a log has reached (never before `current`)."""
    at = PHASES.index(current)
    for marker, phase in EAGER_MARKERS if eager else MARKERS:
        if PHASES.index(phase) > at and marker in text:
            at = PHASES.index(phase)
    return PHASES[at]


def phase_seconds(text: str, eager: bool = False) -> dict[str, float]:
    """Seconds spent in each phase of a finished startup's log, from its lines' timestamps (vLLM's MM-DD HH:MM:SS;
    'starting' counts from the log's first stamped line)."""
    begun: dict[str, datetime] = {}
    first = last = None
    at = 0
    for line in text.splitlines():
        m = _STAMP.search(line)
        if m:
            last = datetime.strptime("2000-" + m.group(1), "%Y-%m-%d %H:%M:%S")
            first = first or last
        if last is None:
            continue
        for marker, phase in EAGER_MARKERS if eager else MARKERS:  # an unstamped line (uvicorn's): the last stamp
            if marker in line and PHASES.index(phase) > at:
                at = PHASES.index(phase)
                begun.setdefault(phase, last)
    if first is None:
        return {}
    begun = {"starting": first, **begun}
    order = [p for p in PHASES if p in begun]
    return {p: (begun[q] - begun[p]).total_seconds() for p, q in zip(order, order[1:])}


@dataclass
class PhaseClock:
    """Follows one startup's log as it grows. `expected`: seconds per phase this startup should take (an earlier
    startup's, else a prior), `source` says where they come from."""

    expected: dict[str, float] = field(default_factory=dict)
    source: str = ""
    phase: str = "starting"
    began: dict[str, float] = field(default_factory=dict)  # phase -> elapsed seconds at which it began

    eager: bool = False
    kind: str = ""  # PRIOR_SECONDS' key of this startup

    def update(self, text: str, elapsed: float) -> bool:
        """Read the log's newest text (all of it, or what was added since the last call); True when a new phase
        began."""
        self.began.setdefault("starting", 0.0)
        now = phase_of(text, self.phase, self.eager)
        if now == self.phase:
            return False
        self.phase = now
        self.began[now] = elapsed
        return True

    def left(self, elapsed: float) -> float | None:
        """Seconds the startup should still take, or None without an expectation."""
        if not self.expected:
            return None
        at = PHASES.index(self.phase)
        rest = sum(self.expected.get(p, 0.0) for p in PHASES[at + 1:-1])
        in_phase = elapsed - self.began.get(self.phase, 0.0)
        return rest + max(0.0, self.expected.get(self.phase, 0.0) - in_phase)

    def line(self, elapsed: float) -> str:
        """'compiling, 97 s in; about 160 s left (from startup 1)'."""
        left = self.left(elapsed)
        est = f"; about {left:.0f} s left ({self.source})" if left is not None and self.phase != "ready" else ""
        return f"{self.phase}, {elapsed:.0f} s in{est}"

    def seconds(self, total: float) -> dict[str, float]:
        """Seconds each phase took, once the startup is over after `total` seconds."""
        order = [p for p in PHASES if p in self.began]
        ends = [self.began[q] for q in order[1:]] + [total]
        return {p: max(0.0, e - self.began[p]) for p, e in zip(order, ends) if p != "ready"}


def kind(enforce_eager: bool, compile_cache: str) -> str:
    """PRIOR_SECONDS' key for a startup: eager, or CUDA graphs with this compile cache."""
    if enforce_eager:
        return "eager"
    return {"warm": "graphs-warm", "warm-jit": "graphs-warm-jit"}.get(compile_cache, "graphs-cold")


def prior(key: str) -> tuple[dict[str, float], str]:
    """The lab's phase seconds for a startup of this kind, and where they come from."""
    return PRIOR_SECONDS[key][0], f"estimate from the lab's {key} startup on an H100"


def partial(seconds: dict[str, float]) -> dict[str, float]:
    """A failed startup's phase seconds without the phase it failed in (cut short, not a duration)."""
    return dict(list(seconds.items())[:-1])
