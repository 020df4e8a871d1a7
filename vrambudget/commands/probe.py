"""`vrambudget probe`: real `vllm serve` startups that find the real ceiling, verify it, record and refit."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from ..errors import UserError
from .common import EXIT_NO, Exit, echo, emit_json, run_safely
from .options import DeploymentOptions, JSON, TARGET, deployment_command


JsonOpt = JSON.typer_param()[0]
TargetOpt = TARGET.typer_param()[0]

def register(app: typer.Typer) -> None:
    deployment_command(app, exclude=("max_model_len", "other_gpu_usage", "simulated_on"), defaults={"gpu": "auto"})(probe)


def probe(opts: DeploymentOptions,
          bisect: Annotated[bool, typer.Option("--bisect", help="At a fixed GMU, find the largest max_model_len "
                                               "that starts and serves (default mode).")] = True,
          target_context: TargetOpt = None,
          vllm_cmd: Annotated[str, typer.Option("--vllm-cmd", help="How to start vLLM's server.")] = "vllm serve",
          port: Annotated[Optional[int], typer.Option("--port", help="Server port (default: a free one).")] = None,
          dummy_weights: Annotated[bool, typer.Option("--dummy-weights", help="--load-format dummy: real shapes, "
                                                      "random values, no download.")] = False,
          startup_timeout: Annotated[float, typer.Option("--startup-timeout", help="Seconds per startup.")] = 900.0,
          poll_seconds: Annotated[float, typer.Option("--poll-seconds", help="Seconds between checks of a starting "
                                  "server and of GPU memory.")] = 0.5,
          extra_args: Annotated[str, typer.Option("--extra-args", help="More vLLM flags, passed through.")] = "",
          runs_dir: Annotated[Optional[str], typer.Option("--runs-dir", help="Where logs and records go "
                                                          "(default: a new folder under the user data dir).")] = None,
          verify: Annotated[bool, typer.Option("--verify/--no-verify", help="Prove the ceiling with a request of "
                                               "about that many prompt tokens.")] = True,
          allow_shared_gpu: Annotated[bool, typer.Option("--allow-shared-gpu")] = False,
          max_startups: Annotated[int, typer.Option("--max-startups", min=1)] = 8,
          simulate_gpu: Annotated[Optional[str], typer.Option("--simulate-gpu", help="Measure a smaller card from the "
                                  "catalog on this bigger GPU: a helper process holds memory so vLLM sees that card's "
                                  "free memory and budget.")] = None,
          free_memory: Annotated[Optional[str], typer.Option("--free-memory", help="With --simulate-gpu or "
                                 "--gpu-memory: the free memory vLLM should see at start (default: the card's total "
                                 "less its CUDA context).")] = None,
          max_model_len_cap: Annotated[Optional[str], typer.Option("--max-model-len", help="Bisect no higher than "
                                       "this context (32768, 64k): the length you want to serve.")] = None,
          turn_tokens: Annotated[int, typer.Option("--turn-tokens", min=0, help="Verify also with a multi-turn "
                                 "session whose context grows by this many tokens a turn (0: off).")] = 0,
          max_turns: Annotated[int, typer.Option("--max-turns", min=1, help="Turns of the multi-turn verify.")] = 12,
          prompt_tokens: Annotated[Optional[str], typer.Option("--prompt-tokens", help="The verify's long prompt "
                                   "(tokens, 120000 or 120k; default: about the length being proven). It follows a "
                                   "first request of 200 prompt tokens and 250 generated, as a benchmark sends it.")]
          = None,
          auto_fit: Annotated[bool, typer.Option("--auto-fit/--fixed-lengths", help="Let vLLM fit the length itself "
                              "(--max-model-len auto: 2 startups with CUDA graphs, the second warm; vLLM 0.20+), or "
                              "search fixed lengths.")] = True,
          refit: Annotated[bool, typer.Option("--fit/--no-fit", help="Refit coefficients at the end.")] = True,
          json_out: JsonOpt = False) -> None:
    """Find the real ceiling with real `vllm serve` startups, verify it, record every startup, refit.

    While it runs it prints each startup's phase as vLLM's log reaches it (loading weights, compiling, profiling,
    allocating the KV cache, capturing graphs), the time so far and about how long is left (from this probe's
    earlier startups, else the lab's measured ones), then each verify request; --json prints only the result."""

    def go() -> None:
        import time
        from pathlib import Path

        from ..output.render import probe_summary_text
        from ..probe.session import ProbeOptions, Prober, simulation
        from ..profiles import user_dir
        from ..units import parse_tokens

        sim = simulate_gpu or (opts.gpu_memory if free_memory else None)
        d, c = opts.with_(gpu=simulate_gpu or (None if opts.gpu_memory else opts.gpu)).build()
        _check_search(d, opts, target_context, max_model_len_cap, bool(sim))
        sim_opts: dict = {}
        if sim:  # plan what runs: the card's memory on this GPU's chip, vLLM seeing the free memory the blocker leaves
            sim_opts, runs = simulation(d.gpu, free_memory)
            d = d.with_(gpu=runs, free_at_start_bytes=sim_opts["simulate_free_bytes"])
        rd = Path(runs_dir) if runs_dir else user_dir() / "runs" / time.strftime("%Y%m%d-%H%M%S")
        o = ProbeOptions(vllm_cmd=_command(vllm_cmd, "--vllm-cmd"), port=port, dummy_weights=dummy_weights,
                         startup_timeout=startup_timeout, poll_seconds=poll_seconds, extra_args=_command(extra_args, "--extra-args"), runs_dir=rd,
                         verify=verify, allow_shared_gpu=allow_shared_gpu, max_startups=max_startups,
                         turn_tokens=turn_tokens, max_turns=max_turns, auto_fit=auto_fit,
                         prompt_tokens=parse_tokens(prompt_tokens, "--prompt-tokens") if prompt_tokens else None,
                         max_model_len=parse_tokens(max_model_len_cap, "--max-model-len") if max_model_len_cap else None, **sim_opts)
        # progress to stdout for people; with --json only warnings, on stderr
        prober = Prober(d, c, o, report=lambda line: (echo(line, err=True) if line.startswith("warning:") else None)
                        if json_out else echo(line))
        summary = _search(prober, rd, parse_tokens(target_context, "--target-context") if target_context else None)
        if refit and prober.records_path.exists():
            summary["fit"] = _refit(prober, d, json_out)
        emit_json(summary) if json_out else echo(probe_summary_text(summary))
        if summary.get("failed"):
            raise Exit(EXIT_NO)

    run_safely(go)


def _command(text: str, flag: str) -> list[str]:
    """A command line given as one string, split as a shell would (an unclosed quote is a one-line error)."""
    import shlex

    try:
        return shlex.split(text)
    except ValueError as e:
        raise UserError(f"{flag} {text[:60]!r}: {e}") from None


def _remove_unused(rd) -> None:
    """A runs folder this probe created and never started anything in: removed (its lock file only)."""
    for name in (".probe.lock",):
        (rd / name).unlink(missing_ok=True)
    try:
        rd.rmdir()
    except OSError:  # something else is in it: not ours to remove
        pass


def _check_search(d, opts: DeploymentOptions, target_context, max_model_len_cap, simulated: bool) -> None:
    """What the probe cannot search: several hosts, a target context beside a cap or a GMU, a simulated card for
    several workers."""
    from ..parallel import several

    if d.nodes > 1:
        raise UserError(f"--nodes {d.nodes}: the probe starts vLLM on this host only; probe each host's share, or "
                        "use predict / serve-cmd for several hosts")
    if target_context and max_model_len_cap:
        raise UserError("--target-context finds the smallest GMU for one length and --max-model-len caps the "
                        "ceiling search at a GMU: give one")
    if target_context and opts.gmu is not None:
        raise UserError("--target-context finds the GMU itself; leave --gpu-memory-utilization out")
    if target_context and several(d):
        raise UserError("--target-context with pipeline stages or mixed cards: its GMU search plans one budget; "
                        "probe the ceiling at a GMU (the default --bisect) instead")
    if simulated and d.tp * d.pp * d.dp > 1:
        raise UserError("--simulate-gpu / --free-memory with several workers: the blocker holds one GPU; probe "
                        "the real cards")


def _search(prober, rd, target_tokens: int | None) -> dict:
    """The probe's search (the smallest GMU for a target, else the ceiling); refused before any startup, it leaves
    nothing on disk; Ctrl-C stops every server it started and says where the logs are."""
    created = not rd.exists()
    try:
        return prober.target(target_tokens) if target_tokens else prober.bisect()
    except UserError:
        if created and not prober.attempts:
            _remove_unused(rd)
        raise
    except KeyboardInterrupt as e:
        what = str(e) or "Ctrl-C"
        echo(f"probe interrupted ({what}) after {len(prober.attempts)} startup(s): every server it started is "
             f"stopped; logs and records so far are in {rd}", err=True)
        raise Exit(130) from None


def _refit(prober, d, json_out: bool) -> dict:
    """Refit the coefficients on this probe's records (skipped, and said, where no startup reached the KV cache)."""
    from .fit import fit_and_report

    try:
        return fit_and_report([str(prober.records_path)], d.rules.version, d.gpu.key, d.model.ref, None,
                              quiet=json_out)
    except UserError as e:
        if not json_out:
            echo(f"fit skipped: {e}")
        return {"skipped": str(e)}
