"""`vrambudget explain`: a vLLM startup log in plain words, its budget next to predict's."""

from __future__ import annotations

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
        from ..comparison import explain_log
        from ..hardware.catalog import lookup
        from ..output.render import explain_text, partial_explain_text, workers_text

        name = "stdin" if log == "-" else log
        text = read_stdin() if log == "-" else read_text(Path(log))
        given = {k: v for k, v in {
            "gpu_memory_utilization": gmu, "tensor_parallel_size": tp, "max_num_seqs": max_num_seqs,
            "max_num_batched_tokens": max_num_batched_tokens, "kv_cache_dtype": kv_cache_dtype,
            "enforce_eager": enforce_eager, "max_model_len": _length(max_model_len)}.items() if v is not None}
        e = explain_log(text, name, model, lookup(gpu) if gpu else None, drafter, given, boot)
        if json_out:
            emit_json(e.json)  # the warnings are among its keys
            return
        if e.comparison is None:
            echo(partial_explain_text(log, e.json))
            return
        echo(explain_text(log, e.comparison))
        if e.workers:
            echo(workers_text(e.workers))
        for w in e.warnings:
            echo(f"warning: {w}", err=True)

    run_safely(go)


def _length(max_model_len: str | None) -> int | None:
    """--max-model-len as given to explain: tokens, or -1 for auto."""
    from ..units import parse_tokens

    if not max_model_len:
        return None
    return -1 if max_model_len.strip().lower() in ("auto", "-1") else parse_tokens(max_model_len, "--max-model-len")
