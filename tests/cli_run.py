"""Run `vrambudget` as a user runs it (vrambudget.cli.main, fast path included), in-process."""

from __future__ import annotations

import sys

from vrambudget import cli


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of `vrambudget ARGV`."""
    old = sys.argv
    sys.argv = ["vrambudget", *argv]
    try:
        cli.main()
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    finally:
        sys.argv = old
    out = capsys.readouterr()
    return code, out.out, out.err
