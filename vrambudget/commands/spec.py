"""Options as data, read two ways: by typer (help, errors, every command) and by `parse`, a fast path for the
commands people run most (predict, table), so that a plain invocation does not pay for importing typer (about
0.1 s of a 0.2 s budget). `parse` accepts only what is plainly valid and returns None for anything else (--help,
an unknown flag, a value of the wrong type or out of range), which then goes to typer and its messages."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence


@dataclass(frozen=True)
class Opt:
    """One command-line option: its parameter name, flags, type (str, int, float or bool), default and help.
    A bool option with `off` is a --flag/--no-flag pair; `multiple` collects repeated values in a list."""

    name: str
    flags: tuple[str, ...]
    type: type
    default: Any
    help: str = ""
    off: str | None = None
    min: float | None = None
    max: float | None = None
    multiple: bool = False
    panel: str | None = None

    def typer_param(self):
        """(annotation, default) of this option for a typer signature (imports typer: not on the fast path)."""
        from typing import Annotated, Optional

        import typer

        decls = [f"{self.flags[0]}/{self.off}", *self.flags[1:]] if self.off else list(self.flags)
        kw: dict[str, Any] = {"help": self.help or None}
        if self.min is not None:
            kw["min"] = self.min
        if self.max is not None:
            kw["max"] = self.max
        if self.panel:
            kw["rich_help_panel"] = self.panel
        if self.multiple:
            ann: Any = Optional[list[self.type]]  # type: ignore[name-defined]
        elif self.default is None:
            ann = Optional[self.type]
        else:
            ann = self.type
        return Annotated[ann, typer.Option(*decls, **kw)], self.default


def parse(argv: Sequence[str], specs: Sequence[Opt]) -> dict[str, Any] | None:
    """Option values (defaults filled in) for a plainly valid argv, else None (let typer answer)."""
    values = {s.name: s.default for s in specs}
    flags: dict[str, tuple[Opt, bool]] = {}
    for s in specs:
        for f in s.flags:
            flags[f] = (s, True)
        if s.off:
            flags[s.off] = (s, False)
    i = 0
    while i < len(argv):
        arg, value = argv[i], None
        if arg.startswith("--") and "=" in arg:
            arg, value = arg.split("=", 1)
        if arg not in flags:
            return None
        s, on = flags[arg]
        i += 1
        if s.type is bool:
            if value is not None:
                return None
            values[s.name] = on
            continue
        if value is None:
            if i >= len(argv):
                return None
            value, i = argv[i], i + 1
        try:
            x = s.type(value)
        except ValueError:
            return None
        if (s.min is not None and x < s.min) or (s.max is not None and x > s.max):
            return None
        if s.multiple:
            values[s.name] = [*(values[s.name] or []), x]
        else:
            values[s.name] = x
    return values
