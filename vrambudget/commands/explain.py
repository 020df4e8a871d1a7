"""`vrambudget explain`: a vLLM startup log in plain words, its budget next to predict's."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from ..inputs import read_stdin
from ..profiles import read_text
from .common import echo, emit_json, run_safely
from .options import JSON, OPTIONS


JsonOpt = JSON.typer_param()[0]
ModelOpt = OPTIONS["model"].typer_param()[0]
GpuOpt = OPTIONS["gpu"].typer_param()[0]

def register(app: typer.Typer) -> None:
    app.command()(explain)


def explain(log: Annotated[str, typer.Argument(help="A vLLM startup log (a file, or - for stdin).")],
            model: ModelOpt = None, gpu: GpuOpt = None,
            drafter: Annotated[str | None, typer.Option(
                "--drafter", metavar="<str>",
                help="The DFlash drafter the log's speculative config names, where its path is not on this "
                     "machine: a bundled drafter (see `vrambudget models`) or a folder with its config.json.")] = None,
            boot: Annotated[int | None, typer.Option("--boot", help="Which startup of a log holding several "
                                                     "(a restart, an upgrade): 1 the first, -1 the last (default).")]
            = None,
            gmu: Annotated[float | None, typer.Option("--gpu-memory-utilization", "--gmu",
                                                      help="The GMU it ran with, where the log lacks it.")] = None,
            tp: Annotated[int | None, typer.Option("--tensor-parallel-size", "-tp", min=1,
                                                   help="Its tensor parallel size, where the log lacks it.")] = None,
            max_model_len: Annotated[str | None, typer.Option("--max-model-len",
                                                              help="Its max_model_len, where the log lacks it.")]
            = None,
            max_num_seqs: Annotated[int | None, typer.Option("--max-num-seqs", min=1)] = None,
            max_num_batched_tokens: Annotated[int | None, typer.Option("--max-num-batched-tokens", min=1)] = None,
            kv_cache_dtype: Annotated[str | None, typer.Option("--kv-cache-dtype")] = None,
            enforce_eager: Annotated[bool | None, typer.Option("--enforce-eager/--cuda-graphs",
                                                               help="Whether it ran eager.")] = None,
            json_out: JsonOpt = False) -> None:
    """Read a vLLM startup log: the flags it was started with, its budget next to predict's, and what
    its outcome means. A log holding several startups is explained one at a time (the last unless --boot); the
    log's own figures (requested memory, weights, workers) are checked against the deployment read from it."""

    def go() -> None:
        from ..errors import UserError
        from ..comparison import compare, cross_check, deployment_from_log, explain_json, partial_json, per_worker
        from ..hardware.catalog import lookup
        from ..logparse import parse_log, require_vllm, split_startups
        from ..output.render import explain_text, partial_explain_text, workers_text

        name = "stdin" if log == "-" else log
        text = read_stdin() if log == "-" else read_text(Path(log))
        boots = split_startups(text) or [text]
        n = len(boots)
        index = _boot_index(boot, n, name)
        facts = require_vllm(parse_log(boots[index]), name)
        given = {k: v for k, v in {
            "gpu_memory_utilization": gmu, "tensor_parallel_size": tp, "max_num_seqs": max_num_seqs,
            "max_num_batched_tokens": max_num_batched_tokens, "kv_cache_dtype": kv_cache_dtype,
            "enforce_eager": enforce_eager, "max_model_len": _length(max_model_len)}.items() if v is not None}
        card = lookup(gpu) if gpu else None
        try:
            d = deployment_from_log(facts, model, card, drafter, given)
        except UserError as e:
            if model or gpu or drafter or given:  # what the user gave is wrong: theirs to fix
                raise
            j = partial_json(facts, str(e))  # the log lacks it: say what it still states
            emit_json(j) if json_out else echo(partial_explain_text(log, j))
            return
        cmp = compare(facts, d)
        b = cmp.prediction.budget
        warnings = cross_check(facts, d, given, (b.weights_bytes + b.mtp_weights_bytes) / (1 << 30))
        if n > 1:
            warnings.insert(0, f"{name} holds {n} startups: this is startup {index + 1} ({'the last; ' if index == n - 1 else ''}"
                               "--boot N for another)")
        workers = per_worker(boots[index], d)
        if json_out:
            emit_json({**explain_json(cmp, warnings, (index + 1, n)), "workers": workers})
            return
        echo(explain_text(log, cmp))
        if workers:
            echo(workers_text(workers))
        for w in warnings:
            echo(f"warning: {w}", err=True)

    run_safely(go)


def _boot_index(boot: int | None, n: int, name: str) -> int:
    """The index of the startup --boot names among a log's n (default: the last)."""
    from ..errors import UserError

    pick = -1 if boot is None else boot
    if pick == 0 or not -n <= pick <= n:
        raise UserError(f"--boot {pick}: {name} holds {n} startup(s); give 1 to {n}, or -1 for the last")
    return pick - 1 if pick > 0 else n + pick


def _length(max_model_len: str | None) -> int | None:
    """--max-model-len as given to explain: tokens, or -1 for auto."""
    from ..units import parse_tokens

    if not max_model_len:
        return None
    return -1 if max_model_len.strip().lower() in ("auto", "-1") else parse_tokens(max_model_len, "--max-model-len")
