"""The one exception type the CLI turns into a one-line message (never a traceback)."""


class UserError(Exception):
    """Bad input or a configuration that cannot work; the message says what to do."""
