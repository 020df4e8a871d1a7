"""vrambudget: predict how vLLM spends GPU memory, and the longest context a deployment serves."""

__version__ = "0.1.0"
