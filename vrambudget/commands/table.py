"""`vrambudget table`: ceilings over GMU x CUDA graphs/eager x MTP off/on."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from ..errors import UserError
from .common import emit_json, run_safely
from .options import DeploymentOptions, JsonOpt, PlotOpt, TargetOpt, deployment_command

# the columns choose these; the rest of the deployment options apply to every cell
COLUMN_FLAGS = ("gmu", "enforce_eager", "mtp", "speculative_config", "max_model_len")


def register(app: typer.Typer) -> None:
    deployment_command(app, exclude=COLUMN_FLAGS)(table)


def table(opts: DeploymentOptions,
          mtp: Annotated[int, typer.Option("--mtp", help="MTP tokens of the MTP columns.", min=1, max=8)] = 2,
          gmu_min: Annotated[float, typer.Option("--gmu-min")] = 0.80,
          gmu_max: Annotated[float, typer.Option("--gmu-max")] = 0.99,
          gmu_step: Annotated[float, typer.Option("--gmu-step")] = 0.01,
          target_context: TargetOpt = None, plot: PlotOpt = None,
          records: Annotated[Optional[list[str]], typer.Option(
              "--records", help="Probe records to draw over the predicted curves (with --plot).")] = None,
          json_out: JsonOpt = False) -> None:
    """Ceiling table: longest max_model_len over GMU x graphs/eager x MTP off/on."""

    def go() -> None:
        from ..output.render import table_text
        from ..predict import ceiling_table, target_row
        from ..units import parse_tokens

        if not (0 < gmu_min <= gmu_max <= 1) or gmu_step <= 0:
            raise UserError("need 0 < --gmu-min <= --gmu-max <= 1 and --gmu-step > 0")
        d, c = opts.with_(mtp=0).build()
        n = int(round((gmu_max - gmu_min) / gmu_step)) + 1
        gmus = [round(gmu_min + i * gmu_step, 4) for i in range(n)]
        t = ceiling_table(d, c, gmus, mtp)
        tokens = parse_tokens(target_context) if target_context else None
        target = target_row(d, c, tokens, mtp) if tokens else None
        target_first = target_row(d, c, tokens, mtp, "cold") if tokens else None
        if json_out:
            emit_json({**t, "target_context": tokens, "min_gmu": target, "min_gmu_first_boot": target_first,
                       "inputs": d.inputs()})
        else:
            typer.echo(f"{d.model.ref} on {d.gpu.name}, {d.version_label}, KV {d.kv_cache_dtype}")
            typer.echo(table_text(t, target, tokens, target_first))
        if plot:
            from pathlib import Path

            from ..output import plots
            from ..profiles import read_jsonl

            pts = plots.probe_points([r for f in records or [] for r in read_jsonl(Path(f))])
            ax = plots.ceiling_curves(t, points=pts, title=f"{d.model.ref} on {d.gpu.name}, KV {d.kv_cache_dtype}")
            typer.echo(f"plot: {plots.save(ax, plot)}", err=json_out)

    run_safely(go)
