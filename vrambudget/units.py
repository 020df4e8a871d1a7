"""Byte and token arithmetic shared by every module. GiB = 2**30 bytes, as vLLM logs it."""

from __future__ import annotations

import re

from .errors import UserError, shown

GiB = 1 << 30
MiB = 1 << 20

DTYPE_BYTES = {
    "float32": 4, "fp32": 4, "float": 4,
    "bfloat16": 2, "bf16": 2, "float16": 2, "fp16": 2, "half": 2,
    "fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1, "float8_e4m3fn": 1, "int8": 1, "uint8": 1,
}


def cdiv(a: int, b: int) -> int:
    """Ceiling division of non-negative integers."""
    return -(-a // b)


def gib(n_bytes: float) -> float:
    """Bytes -> GiB."""
    return n_bytes / GiB


# float dtypes by every name configs and vLLM's --dtype give them -> one name each
FLOAT_DTYPES = {"float32": "float32", "fp32": "float32", "float": "float32", "bfloat16": "bfloat16", "bf16": "bfloat16",
                "float16": "float16", "fp16": "float16", "half": "float16"}


def float_dtype(name: str) -> str:
    """The one name of a float dtype ('half' -> 'float16', 'torch.bfloat16' -> 'bfloat16'); other names unchanged."""
    key = str(name).replace("torch.", "").lower()
    return FLOAT_DTYPES.get(key, key)


def dtype_bytes(name: str) -> int:
    """Bytes per element of a dtype name as it appears in configs and vLLM flags."""
    key = float_dtype(name)
    if key not in DTYPE_BYTES:
        raise UserError(f"unknown dtype {name!r}; known: {', '.join(sorted(DTYPE_BYTES))}")
    return DTYPE_BYTES[key]


_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([KMGT]i?B?|B)?\s*$", re.IGNORECASE)
_MULT = {"b": 1, "k": 1e3, "kb": 1e3, "kib": 1 << 10, "m": 1e6, "mb": 1e6, "mib": 1 << 20,
         "g": 1e9, "gb": 1e9, "gib": 1 << 30, "t": 1e12, "tb": 1e12, "tib": 1 << 40}


SIZE_LIMIT = 1 << 60  # bytes: an exbibyte, past any GPU or host
TOKEN_LIMIT = 1 << 40  # tokens: config.json's own count limit (model/config_check.COUNT_LIMIT)


def parse_size(text: str, what: str = "memory size") -> int:
    """'23.5GiB', '24GB', '16380MiB' or a plain byte count -> bytes (a bare number above 4096 is
    bytes, below it GiB). `what` names the input in an error (e.g. '--gpu-memory')."""
    m = _SIZE.match(str(text))
    if not m:
        raise UserError(f"{what} {shown(text)}: cannot read it as a memory size; write it like 23.5GiB, 24GB or 16380MiB")
    value, unit = float(m.group(1)), (m.group(2) or "").lower()
    if not value > 0:
        raise UserError(f"{what} {shown(text)}: must be more than zero")
    size = (value if value > 4096 else value * GiB) if not unit else value * _MULT[unit]
    if not size <= SIZE_LIMIT:  # also NaN and infinity
        raise UserError(f"{what} {shown(text)}: more than any GPU holds (at most {SIZE_LIMIT // 2**50:,} PiB)")
    return int(size)


def parse_tokens(text: str, what: str = "token count") -> int:
    """'32768', '32k', '128K', '1M' -> tokens (k = 1024, as context lengths are usually meant). `what` names the
    input in an error (e.g. '--max-model-len')."""
    t = str(text).strip().lower().replace(",", "").replace("_", "")
    mult = 1
    if t.endswith("k"):
        t, mult = t[:-1], 1024
    elif t.endswith("m"):
        t, mult = t[:-1], 1024 * 1024
    try:
        value = float(t)
    except ValueError:
        raise UserError(f"{what} {shown(text)}: cannot read it as tokens; write it like 32768 or 32k") from None
    if not value >= 1:  # also NaN
        raise UserError(f"{what} {shown(text)}: must be at least 1 token")
    if not value * mult <= TOKEN_LIMIT:  # also infinity
        raise UserError(f"{what} {shown(text)}: more tokens than any model holds (at most {TOKEN_LIMIT:,})")
    return int(value * mult)
