"""`vrambudget table`: ceilings over GMU x CUDA graphs/eager x MTP off/on."""

from __future__ import annotations

from typing import Any

from ..errors import UserError
from .common import echo, emit_json, run_safely
from .options import JSON, PLOT, TARGET, DeploymentOptions, deployment_command
from .spec import Opt

# the columns choose these; the rest of the deployment options apply to every cell
COLUMN_FLAGS = ("gmu", "enforce_eager", "mtp", "speculative_config", "max_model_len")
OWN = (Opt("mtp_columns", ("--mtp",), int, 2, "MTP tokens of the MTP columns.", min=1, max=8),
       Opt("gmu_min", ("--gmu-min",), float, 0.80, ""), Opt("gmu_max", ("--gmu-max",), float, 0.99, ""),
       Opt("gmu_step", ("--gmu-step",), float, 0.01, ""), TARGET, PLOT,
       Opt("records", ("--records",), str, None, "Probe records to draw over the predicted curves (with --plot).",
           multiple=True),
       JSON)


def register(app: Any) -> None:
    deployment_command(app, exclude=COLUMN_FLAGS, own=OWN)(table)


def table(opts: DeploymentOptions, **own: Any) -> None:
    """Ceiling table: longest max_model_len over GMU x graphs/eager x MTP off/on."""
    mtp, gmu_min, gmu_max, gmu_step = own["mtp_columns"], own["gmu_min"], own["gmu_max"], own["gmu_step"]
    target_context, plot, records, json_out = own["target_context"], own["plot"], own["records"], own["json_out"]

    def go() -> None:
        from ..output.render import table_text
        from ..prediction import ceiling_table, target_row
        from ..units import parse_tokens

        from pathlib import Path

        from ..profiles import read_jsonl

        if not (0 < gmu_min <= gmu_max <= 1) or gmu_step <= 0:
            raise UserError("need 0 < --gmu-min <= --gmu-max <= 1 and --gmu-step > 0")
        if records and not plot:
            raise UserError("--records draws probe records over the curves of --plot: add --plot FILE.png")
        if plot:  # before any output: a folder, a device, a pipe or a link is refused in one line
            from ..profiles import check_output

            check_output(Path(plot), "--plot")
        drawn = [r for f in records or [] for r in read_jsonl(Path(f))]  # read first: a bad file prints nothing
        d, c = opts.with_(mtp=0).build()
        from ..parallel import one_budget_only

        one_budget_only(d, "table")
        n = int(round((gmu_max - gmu_min) / gmu_step)) + 1
        gmus = [round(gmu_min + i * gmu_step, 4) for i in range(n)]
        t = ceiling_table(d, c, gmus, mtp)
        tokens = parse_tokens(target_context, "--target-context") if target_context else None
        target = target_row(d, c, tokens, mtp) if tokens else None
        target_first = target_row(d, c, tokens, mtp, "cold") if tokens else None
        if json_out:
            emit_json({**t, "target_context": tokens, "min_gmu": target, "min_gmu_first_boot": target_first,
                       "inputs": d.inputs()})
        else:
            from ..output.render import subject_line

            echo(f"{subject_line(d, opts.defaulted())} KV {d.kv_cache_dtype}")
            echo(table_text(t, target, tokens, target_first))
        if plot:
            from ..output import plots

            pts = plots.probe_points(drawn)
            ax = plots.ceiling_curves(t, points=pts, title=f"{d.model.ref} on {d.gpu.name}, KV {d.kv_cache_dtype}")
            echo(f"plot: {plots.save(ax, plot)}", err=json_out)

    run_safely(go)
