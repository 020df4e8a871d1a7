"""The `vrambudget` command line: the typer app, assembled from one module per command (vrambudget/commands).
Errors print one line and exit 2, never a traceback."""

from __future__ import annotations

import sys

import typer

from .commands import catalog, explain, fit, plan, predict, probe, serve_cmd, table
from .commands.common import mtp_default

app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None,
                  help="Predict how vLLM spends GPU memory and the longest context a deployment serves; "
                       "prove it with real startups (probe) and learn from them (fit).")
for command in (predict, table, plan, probe, fit, explain, serve_cmd, catalog):
    command.register(app)

_mtp_default = mtp_default  # the name tests and older scripts import


def main() -> None:
    sys.argv[1:] = mtp_default(sys.argv[1:])
    app()


if __name__ == "__main__":
    main()
