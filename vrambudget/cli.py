"""The `vrambudget` command line: the typer app, assembled from one module per command (vrambudget/commands).
Errors print one line and exit 2, never a traceback. `predict` and `table` with plainly valid options take a fast
path that does not import typer (commands/spec.py); everything else (--help, errors, other commands) goes to typer."""

from __future__ import annotations

import sys

from .commands.common import mtp_default

FAST = ("predict", "table")


def _one_line_group():
    """typer's group, with click's usage errors (a flag's type or range, an unknown option) as one line on
    stderr, exit 2, like every other bad input."""
    import typer.core

    click = getattr(typer.core, "_click", None)  # typer 0.2x vendors click as typer._click; older ones use click
    if click is None:
        import click

    from .commands.common import EXIT_USAGE, echo, one_line

    abort = getattr(click.exceptions, "Abort", None) or typer.core.Abort  # where each typer/click keeps it

    class OneLineGroup(typer.core.TyperGroup):
        def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
            try:
                code = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
            except click.exceptions.NoArgsIsHelpError as e:
                echo(e.ctx.get_help())
                code = 0
            except click.exceptions.UsageError as e:
                where = e.ctx.command_path if e.ctx else "vrambudget"
                echo(f"error: {one_line(e.format_message())} (`{where} --help` lists the options)", err=True)
                code = EXIT_USAGE
            except click.exceptions.ClickException as e:
                echo(f"error: {one_line(e.format_message())}", err=True)
                code = e.exit_code
            except abort:
                echo("aborted", err=True)
                code = 130  # Ctrl-C, as a shell reports it
            if not standalone_mode:
                return code
            raise SystemExit(code if isinstance(code, int) else 0)

    return OneLineGroup


def build_app():
    """The typer app with every command registered."""
    import typer

    from .commands import catalog, explain, fit, plan, predict, probe, serve_cmd, table

    app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None, cls=_one_line_group(),
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
    from .commands.common import guarded

    def run() -> None:
        argv = mtp_default(sys.argv[1:])
        if argv[:1] in (["--version"], ["-V"]):
            from . import __version__
            from .vllm_rules import RULES, _key

            known = sorted(RULES, key=_key)
            print(f"vrambudget {__version__} (plans vLLM {known[0]} to {known[-1]}.x; `vrambudget --help` lists the "
                  "commands)")
            return
        if fast(argv):
            return
        sys.argv[1:] = argv
        build_app()()

    guarded(run)


if __name__ == "__main__":
    main()
