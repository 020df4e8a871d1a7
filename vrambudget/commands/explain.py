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
            json_out: JsonOpt = False) -> None:
    """Read a vLLM startup log: the flags it was started with, its budget next to predict's, and what
    its outcome means."""

    def go() -> None:
        from ..errors import UserError
        from ..explain import compare, deployment_from_log, explain_json, partial_json
        from ..hardware.catalog import lookup
        from ..logparse import parse_log, require_vllm
        from ..output.render import explain_text, partial_explain_text

        text = read_stdin() if log == "-" else read_text(Path(log))
        facts = require_vllm(parse_log(text), "stdin" if log == "-" else log)
        card = lookup(gpu) if gpu else None
        try:
            d = deployment_from_log(facts, model, card, drafter)
        except UserError as e:
            if model or gpu or drafter:  # what the user gave is wrong: theirs to fix
                raise
            j = partial_json(facts, str(e))  # the log lacks it: say what it still states
            emit_json(j) if json_out else echo(partial_explain_text(log, j))
            return
        cmp = compare(facts, d)
        emit_json(explain_json(cmp)) if json_out else echo(explain_text(log, cmp))

    run_safely(go)
