"""`vrambudget gpus` and `vrambudget models`: the bundled GPU catalog and model profiles."""

from __future__ import annotations

import typer

from .common import echo, emit_json, run_safely
from .options import JSON


JsonOpt = JSON.typer_param()[0]

def register(app: typer.Typer) -> None:
    app.command()(gpus)
    app.command()(models)


def gpus(json_out: JsonOpt = False) -> None:
    """List the GPU catalog (total memory as CUDA reports it, and where each figure comes from)."""

    def go() -> None:
        from ..hardware.catalog import catalog
        from ..output.catalog import gpus_json, gpus_text

        emit_json(gpus_json(catalog())) if json_out else echo(gpus_text(catalog()))

    run_safely(go)


def models(json_out: JsonOpt = False,
           families: bool = typer.Option(False, "--families", help="The model families vrambudget plans (any "
                                         "checkpoint of one: a folder or Hub id), with the evidence behind each, and "
                                         "what it refuses.")) -> None:
    """List the bundled model profiles with their key figures (--families: every architecture it plans)."""

    def go() -> None:
        from ..output.catalog import families_table, models_table

        out, text = families_table() if families else models_table()
        emit_json(out) if json_out else echo(text)

    run_safely(go)
