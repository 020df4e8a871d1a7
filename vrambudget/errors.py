"""The one exception type the CLI turns into a one-line message (never a traceback)."""


class UserError(Exception):
    """Bad input or a configuration that cannot work; the message says what to do."""


def shown(value: object, n: int = 48) -> str:
    """A value the user gave, as an error message quotes it: its repr, cut to `n` characters (a 5000-digit version
    string stays one readable line)."""
    r = repr(value)
    return r if len(r) <= n else r[: n - 5] + "...'" + f" ({len(str(value)):,} characters)"
