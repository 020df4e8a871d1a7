"""`vrambudget fit`: refit the measured coefficients from probe records or vLLM logs into a profile."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from .common import echo, emit_json, run_safely
from .options import JSON, OPTIONS


JsonOpt = JSON.typer_param()[0]
ModelOpt = OPTIONS["model"].typer_param()[0]
GpuOpt = OPTIONS["gpu"].typer_param()[0]
VersionOpt = OPTIONS["vllm_version"].typer_param()[0]

def register(app: typer.Typer) -> None:
    app.command()(fit)


def fit(records: Annotated[list[str], typer.Argument(help="Probe records (*.jsonl) and/or vLLM startup logs.")],
        gpu: GpuOpt = None, model: ModelOpt = None, vllm_version: VersionOpt = None,
        out: Annotated[Optional[str], typer.Option("--out", help="Write the profile here instead of the user "
                                                   "profile dir predict reads.")] = None,
        json_out: JsonOpt = False) -> None:
    """Refit the measured coefficients from records/logs and save them as a profile predict uses."""

    def go() -> None:
        from ..fit import record_scope
        from ..hardware.catalog import lookup
        from ..profiles import check_output
        from ..vllm_rules import rules_for

        if out:  # before any work: a folder, a device, a pipe, a link or a read-only file is refused in one line
            check_output(Path(out), "--out")
        scope = record_scope([Path(p) for p in records])
        version = rules_for(vllm_version or scope["vllm_version"]).version
        gpu_key = lookup(gpu).key if gpu else scope["gpu_key"]
        model_ref = model or scope["model"]
        summary = fit_and_report(records, version, gpu_key, model_ref, out, quiet=json_out)
        if json_out:
            emit_json(summary)

    run_safely(go)


def fit_and_report(paths: list[str], version: str, gpu_key: str | None, model_ref: str | None, out: str | None,
                   quiet: bool = False) -> dict:
    """Refit, write the profile, print the per-startup errors before and after (unless `quiet`)."""
    from ..fit import fit_and_write, worst_error

    res, dest = fit_and_write(paths, version, gpu_key, model_ref, out)
    if not quiet:
        from tabulate import tabulate

        rows = [[f"{Path(src).parent.name}/{Path(src).name}", f"{b:+.3f}", f"{a:+.3f}"]
                for (src, b), (_, a) in zip(res.before, res.after, strict=True)]
        echo(tabulate(rows, headers=["startup", "error before (GiB)", "after"], tablefmt="simple",
                            disable_numparse=True))
        echo(f"refitted {', '.join(res.changed) or 'nothing'}; worst available-KV error "
                   f"{worst_error(res.before):.3f} -> {worst_error(res.after):.3f} GiB; profile: {dest}")
    return {"profile": str(dest), "changed": res.changed, "worst_error_before_gib": round(worst_error(res.before), 4),
            "worst_error_after_gib": round(worst_error(res.after), 4)}
