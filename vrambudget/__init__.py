"""vrambudget: predict how vLLM spends GPU memory, and the longest context a deployment serves."""

__version__ = "0.1.0"


def __getattr__(name: str):
    """The Python API (vrambudget/api.py), imported on first use so `import vrambudget` stays instant."""
    if name in ("predict", "plan", "explain", "serve_command", "Prediction", "flag_names"):
        from . import api

        return getattr(api, name)
    if name == "UserError":
        from .errors import UserError

        return UserError
    raise AttributeError(name)
