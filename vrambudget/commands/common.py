"""What every command shares: one-line errors instead of tracebacks, exit codes, output, reading a file. No typer
here: the fast path (commands/spec.py) runs commands without importing it."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Callable

from ..errors import UserError

EXIT_USAGE = 2  # bad input: a one-line error on stderr
EXIT_NO = 1  # the answer is no (nothing starts, nothing serves, a probe stopped)


class Exit(SystemExit):
    """Leave with this exit code (a SystemExit: typer, click's test runner and the fast path all honour it)."""


def echo(text: str, err: bool = False) -> None:
    print(text, file=sys.stderr if err else sys.stdout)


def run_safely(fn: Callable[[], None]) -> None:
    """Run a command body; a UserError prints `error: ...` in one line and exits 2."""
    try:
        fn()
    except UserError as e:
        echo(f"error: {e}", err=True)
        raise Exit(EXIT_USAGE) from None


def emit_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, indent=2) + "\n")


def read_text(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError as e:
        raise UserError(f"cannot read {path}: {e.strerror}") from None


def mtp_default(argv: list[str]) -> list[str]:
    """`--mtp` takes an optional K: a bare `--mtp` means K = 2 (typer options need a value)."""
    out = []
    for i, a in enumerate(argv):
        out.append(a)
        if a == "--mtp" and (i + 1 == len(argv) or not argv[i + 1].isdigit()):
            out.append("2")
    return out
