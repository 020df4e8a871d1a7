"""What every command shares: one-line errors instead of tracebacks, exit codes, output, reading a file. No typer
here: the fast path (commands/spec.py) runs commands without importing it."""

from __future__ import annotations

import json
import sys
from typing import Any, Callable

from ..errors import UserError

EXIT_USAGE = 2  # bad input (a flag, a file, an environment value): a one-line error on stderr
EXIT_NO = 1  # the answer is no (nothing starts, nothing serves, a probe stopped)
EXIT_BUG = 3  # not the input's fault: vrambudget itself failed (one line; VRAMBUDGET_DEBUG=1 shows the traceback)


class Exit(SystemExit):
    """Leave with this exit code (a SystemExit: typer, click's test runner and the fast path all honour it)."""


def echo(text: str, err: bool = False) -> None:
    print(text, file=sys.stderr if err else sys.stdout)


def run_safely(fn: Callable[[], None]) -> None:
    """Run a command body; a UserError prints `error: ...` in one line and exits 2."""
    try:
        fn()
    except UserError as e:
        echo(f"error: {one_line(str(e))[:1000]}", err=True)
        raise Exit(EXIT_USAGE) from None


def one_line(message: str) -> str:
    """A message as one line (a library's multi-line text folded)."""
    return " ".join(part.strip() for part in message.splitlines() if part.strip())


def guarded(fn: Callable[[], None]) -> None:
    """The program's last line of defence: anything that is not an exit becomes one line and exit 3 (a bug of
    ours, not bad input), with the traceback only under VRAMBUDGET_DEBUG=1."""
    import os

    try:
        fn()
    except (SystemExit, KeyboardInterrupt):
        raise
    except BrokenPipeError:  # `vrambudget ... | head`
        sys.stderr.close()
        raise SystemExit(EXIT_NO) from None
    except Exception as e:
        if os.environ.get("VRAMBUDGET_DEBUG"):
            raise
        echo(f"error: vrambudget failed ({type(e).__name__}: {one_line(str(e))[:300]}); this is a bug, not your "
             "input: please report it with the command (VRAMBUDGET_DEBUG=1 shows the traceback)", err=True)
        raise SystemExit(EXIT_BUG) from None


def emit_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, indent=2) + "\n")


def mtp_default(argv: list[str]) -> list[str]:
    """`--mtp` takes an optional K: a bare `--mtp` means K = 2 (typer options need a value)."""
    out = []
    for i, a in enumerate(argv):
        out.append(a)
        if a == "--mtp" and (i + 1 == len(argv) or not argv[i + 1].lstrip("-").isdigit()):  # -1: a bad K, said so
            out.append("2")
    return out
