"""The `vrambudget` command line: the typer app, assembled from one module per command (vrambudget/commands).
Errors print one line and exit 2, never a traceback. `predict` and `table` with plainly valid options take a fast
path that does not import typer (commands/spec.py); everything else (--help, errors, other commands) goes to typer."""

from __future__ import annotations

import sys

from .commands.common import mtp_default

FAST = ("predict", "table")


def build_app():
    """The typer app with every command registered."""
    import typer

    from .commands import catalog, explain, fit, plan, predict, probe, serve_cmd, table

    app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None,
                      help="Predict how vLLM spends GPU memory and the longest context a deployment serves; "
                           "prove it with real startups (probe) and learn from them (fit).")
    for command in (predict, table, plan, probe, fit, explain, serve_cmd, catalog):
        command.register(app)
    return app


def fast(argv: list[str]) -> bool:
    """Run `predict` or `table` without typer when every option parses plainly; False where typer must answer."""
    if not argv or argv[0] not in FAST:
        return False
    from .commands.options import fast_options

    if argv[0] == "predict":
        from .commands.predict import OWN, predict as command

        parsed = fast_options(argv[1:], OWN)
    else:
        from .commands.table import COLUMN_FLAGS, OWN, table as command

        parsed = fast_options(argv[1:], OWN, COLUMN_FLAGS)
    if parsed is None:
        return False
    opts, own = parsed
    command(opts, **own)
    return True


def __getattr__(name: str):
    if name == "app":  # `from vrambudget.cli import app` (tests, typer's runner) builds it on demand
        return build_app()
    raise AttributeError(name)


_mtp_default = mtp_default  # the name tests and older scripts import


def main() -> None:
    argv = mtp_default(sys.argv[1:])
    if fast(argv):
        return
    sys.argv[1:] = argv
    build_app()()


if __name__ == "__main__":
    main()
