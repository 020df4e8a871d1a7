"""The probe's searches, pure: no processes, no GPU. Each takes a `trial` callback that starts vLLM with one
configuration (and verifies it when asked) and reports what happened; `tests/test_probe_search.py` drives them
with a fake.

Bisect (fixed GMU), in units of the block size:
  1. start at predict's ceiling;
  2. a startup that runs tells the exact KV memory: the planner turns it into the next candidate (`exact`);
     one that is refused tells vLLM's own "estimated maximum model length" (`estimate`), which is the answer;
  3. the bracket [lo, hi) closes by bisection only when neither is there;
  4. the final candidate is verified with real requests; a runtime OOM outside the budget moves to the GMU
     predicted to serve, a failure that is the length's lowers the length.
Target (fixed length): the smallest GMU, in 0.01 steps sized by the logged KV memory that is missing or spare.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable


@dataclass(frozen=True)
class Trial:
    """What one startup (and its verification, when it was asked for) showed."""

    n: int  # the startup's number (as the probe reports it)
    outcome: str  # started | kv_too_small | any other failure (crashed, timed_out, ...)
    exact: int | None = None  # the planner's ceiling from the logged available KV memory (warm boot)
    estimate: int | None = None  # vLLM's "estimated maximum model length"
    available_bytes: float | None = None  # the logged available KV memory
    needed_bytes: float | None = None  # the KV memory vLLM said the length needs (refused startups)
    verified: bool | None = None  # None: not verified (not final, or --no-verify)
    runtime_oom: bool = False  # the verify ran out of memory (or the server died), not a stall
    started_len: int | None = None  # the max_model_len the server started with (vLLM's own fit under auto)
    compile: str | None = None  # "cold" / "warm" as the log says (None: eager)


AUTO = -1  # --max-model-len -1: vLLM fits the length to its KV cache itself


# trial(gmu, max_model_len, verify_if): starts vLLM; when it started, verifies it if verify_if(exact) says so
TrialFn = Callable[[float, int, Callable[[int | None], bool]], Trial]


def _round(tokens: int, block: int) -> int:
    return max(block, tokens // block * block)


def _mid(lo: int, hi: int, block: int) -> int:
    return _round(lo + (hi - lo) // 2, block) if hi - lo > block else lo


def bisect(trial: TrialFn, *, gmu: float, block: int, max_len: int, predicted: int, verify: bool,
           serving_gmu: Callable[[float, int], float | None], report: Callable[[str], None]) -> dict[str, Any]:
    """Largest max_model_len that starts (and serves, with `verify`) at `gmu`. Invariant: `lo` started, `hi` did
    not start or did not serve (exclusive). `serving_gmu(gmu, length)`: the highest GMU predicted to serve that
    length when it is below `gmu` (a runtime OOM there is the margin's), else None."""
    lo, hi, served, serve_failed = 0, max_len + 1, 0, False
    runtime_ooms: list[float] = []  # GMUs at which a length started but a request ran out of memory
    cand = _round(predicted, block) if predicted else block
    while True:
        cand = max(block, min(cand, max_len, max_len if hi > max_len else _round(hi - 1, block)))

        def final(exact: int | None) -> bool:  # nothing above this candidate is left to try: verify it
            return serve_failed or cand >= max_len or cand + block >= hi or (exact is not None and exact <= cand)

        t = trial(gmu, cand, final)
        if t.outcome == "started":
            if not final(t.exact):
                lo = cand  # the next candidate: the exact one the logged KV memory gives, else the middle
                cand = t.exact if t.exact is not None and t.exact > cand else _mid(lo, hi, block)
                continue
            if t.verified is False:
                if t.runtime_oom:
                    runtime_ooms.append(gmu)
                lower = serving_gmu(gmu, cand) if t.runtime_oom else None
                if lower is not None:  # it started, then ran out of memory outside the budget: a lower GMU
                    report(f"[{t.n}] runtime OOM at GMU {gmu:.2f} (a startup-only probe would have certified "
                           f"it); trying GMU {lower:.2f}, the highest predicted to serve")
                    gmu, lo, hi, served, serve_failed = lower, 0, max_len + 1, 0, False
                    continue
                serve_failed, hi = True, cand  # it starts but does not serve: the ceiling is lower
                nxt = _mid(served, hi, block) if served else _round(int(cand * 0.9), block)
                if nxt <= served:
                    return {"ceiling": served, "predicted": predicted, "bracket": [served, hi]}
                cand = nxt
                continue
            served = lo = cand
            if serve_failed and cand + block < hi:
                cand = _mid(cand, hi, block)
                if cand > served:
                    continue
            return {"ceiling": served, "predicted": predicted, "bracket": [served, hi], "gmu": gmu,
                    "runtime_oom_gmus": runtime_ooms}
        if t.outcome == "kv_too_small":
            hi = min(hi, cand)
            if t.estimate is not None:
                hi = min(hi, t.estimate + 1)
            nxt = t.estimate if t.estimate is not None and t.estimate > lo else _mid(lo, hi, block)
            if lo and nxt <= lo:
                cand = lo  # the bracket closed on a length that started but was not verified
                if not verify:
                    return {"ceiling": lo, "predicted": predicted, "bracket": [lo, hi]}
                hi = lo + 1
                continue
            cand = nxt
            continue
        return {"failed": t.outcome, "predicted": predicted}


def auto_fit(trial: TrialFn, *, gmu: float, graphs: bool, cap: int, report: Callable[[str], None]) -> dict[str, Any]:
    """The ceiling in as few startups as vLLM's own messages allow: with --max-model-len auto vLLM fits the length to
    the KV cache it profiled, and the compile-cache key holds the length it started from, not the fitted one, so a
    second boot of the same command loads the first's compiled graphs and fits the ceiling after a restart. Eager: one
    startup, verified. CUDA graphs: the first (cold compile) startup fits the first boot's ceiling, the second (warm)
    the ceiling after a restart, which is verified. `cap`: the longest length asked for (a verify at no more).
    Returns the result, or {"fallback": reason, ...} where the bisection has to take over."""
    def verify_now(exact: int | None) -> bool:
        return True

    first = trial(gmu, AUTO, verify_now)  # under CUDA graphs: whether the first boot's own fit serves
    if first.outcome != "started" or not first.started_len:
        return {"fallback": f"the auto-fit startup {first.outcome}", "first": first}
    if not graphs or first.compile == "warm":  # eager, or the compiled graphs were already there: no restart needed
        return _auto_result(first, first, cap)
    report(f"[{first.n}] vLLM fitted max_model_len {first.started_len:,} on the first boot (compile cache "
           f"{first.compile or 'cold'}); the same command again boots warm and fits the ceiling after a restart")
    second = trial(gmu, AUTO, verify_now)
    if second.outcome != "started" or not second.started_len:
        return {"fallback": f"the restart {second.outcome}", "first": first}
    if second.compile == "cold":
        report(f"[{second.n}] the restart compiled again (the compile cache was not kept): its fit is a first boot's")
    return _auto_result(first, second, cap)


def _auto_result(first: Trial, last: Trial, cap: int) -> dict[str, Any]:
    ceiling = min(last.started_len or 0, cap)
    if last.verified is False:
        return {"fallback": "the fitted length did not serve", "first": first, "hi": ceiling}
    return {"ceiling": ceiling, "fitted": last.started_len, "first_boot": first.started_len, "strategy": "auto-fit",
            "bracket": [ceiling, ceiling + 1], "verified": last.verified}


def target(trial: TrialFn, *, tokens: int, start_gmu: float, need_bytes: int, total_bytes: int) -> dict[str, Any]:
    """Smallest GMU (0.01 steps) at which `tokens` start and serve. Invariant: `ok_g` started and served,
    `bad_g` did not; GMU moves by as many steps as the logged KV memory says are missing (or spare)."""
    g, ok_g, bad_g = start_gmu, None, None

    def steps(nbytes: float) -> float:  # GMU change (0.01 steps, at least one) worth `nbytes`
        return max(1, math.ceil(nbytes / total_bytes * 100 - 1e-9)) / 100

    while 0.01 <= g <= 0.99 and (ok_g is None or g < ok_g) and (bad_g is None or g > bad_g):
        t = trial(g, tokens, lambda exact: True)
        if t.outcome == "started":
            if t.verified is False and t.runtime_oom:
                # a higher GMU leaves even less room outside the budget: no GMU serves these tokens
                return {"failed": "runtime_oom", "tokens": tokens, "runtime_oom_gmus": [g]}
            if t.verified is False:  # started, but the request was never scheduled: more KV cache
                bad_g, g = g, round(g + 0.01, 2)
                continue
            ok_g = g
            slack = t.available_bytes - need_bytes if t.available_bytes is not None else 0.0
            g = round(g - (steps(slack) if slack > 0.01 * total_bytes else 0.01), 2)
        elif t.outcome == "kv_too_small":
            bad_g = g
            short = t.needed_bytes - t.available_bytes \
                if t.needed_bytes is not None and t.available_bytes is not None else 0.0
            g = round(g + steps(short), 2)
        else:
            return {"failed": t.outcome, "tokens": tokens}
    return {"min_gmu": ok_g, "tokens": tokens}
