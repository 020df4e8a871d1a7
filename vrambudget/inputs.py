"""Everything read from outside, bounded and typed once: files and stdin (size, kind, encoding), JSON (finite
numbers, bounded nesting), names that become parts of a path, and numeric options. Each refusal is a UserError
naming the input (one line, exit 2)."""

from __future__ import annotations

import json
import math
import re
import stat
import sys
from pathlib import Path
from typing import Any, BinaryIO

from .errors import UserError

MiB = 1 << 20
LOG_LIMIT = 256 * MiB  # a vLLM startup log is a few MiB; a day of serving stays under this
JSON_LIMIT = 64 * MiB  # config.json, records, profiles (a safetensors index of a 1T model is ~2 MiB)
JSON_DEPTH = 64  # a model's config nests 3-4 levels
NAME_LIMIT = 512  # a model id, a GPU name, a path part


def _read_limited(fh: BinaryIO, limit: int, what: str) -> bytes:
    data = fh.read(limit + 1)
    if len(data) > limit:
        raise UserError(f"{what} is larger than {limit // MiB} MiB: give the file itself, not a device or a stream "
                        "that does not end")
    return data


def read_bytes(path: Path, limit: int, what: str | None = None) -> bytes:
    """A regular file's bytes, at most `limit` (a folder, a device, a FIFO, a missing or unreadable file: one line)."""
    what = what or str(path)
    try:
        st = path.stat()
    except FileNotFoundError:
        raise UserError(f"{what} does not exist") from None
    except OSError as e:
        raise UserError(f"cannot read {what}: {e.strerror or e}") from None
    if stat.S_ISDIR(st.st_mode):
        raise UserError(f"{what} is a folder: give the file itself")
    if not stat.S_ISREG(st.st_mode):
        raise UserError(f"{what} is not a regular file (a device, a socket or a pipe): give a file")
    try:
        with open(path, "rb") as fh:
            return _read_limited(fh, limit, what)
    except OSError as e:
        raise UserError(f"cannot read {what}: {e.strerror or e}") from None


def read_stdin(limit: int = LOG_LIMIT) -> str:
    """Standard input as text, at most `limit` bytes."""
    return decode_text(_read_limited(sys.stdin.buffer, limit, "standard input"))


def decode_text(raw: bytes) -> str:
    """Bytes as text: UTF-8 (BOM or not), UTF-16 with a BOM (PowerShell's `>`) or without one (every other byte
    NUL); undecodable bytes become U+FFFD."""
    if raw.startswith(b"\xef\xbb\xbf"):
        return raw[3:].decode("utf-8", errors="replace")
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        return raw.decode("utf-16", errors="replace")
    head = raw[:4096]
    if len(head) >= 4 and head[1::2].count(0) > len(head) // 4 and head[0::2].count(0) < len(head) // 16:
        return raw.decode("utf-16-le", errors="replace")
    return raw.decode("utf-8", errors="replace").replace("\x00", "")


def read_text(path: Path, limit: int = LOG_LIMIT) -> str:
    return decode_text(read_bytes(path, limit))


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


def _finite_float(text: str) -> float:
    v = float(text)
    if not math.isfinite(v):
        raise ValueError(f"{text[:20]} is out of range")
    return v


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > 30:
        raise ValueError(f"an integer of {len(text)} digits is out of range")
    return int(text)


def _depth(obj: Any, limit: int) -> int:
    """Nesting depth of decoded JSON, iteratively (no recursion), stopping past `limit`."""
    stack, deepest = [(obj, 1)], 0
    while stack:
        o, d = stack.pop()
        deepest = max(deepest, d)
        if deepest > limit:
            return deepest
        if isinstance(o, dict):
            stack.extend((v, d + 1) for v in o.values())
        elif isinstance(o, list):
            stack.extend((v, d + 1) for v in o)
    return deepest


def loads(text: str | bytes, what: str, *, nonfinite: bool = False) -> Any:
    """Strict JSON: no NaN or Infinity, finite floats, integers of at most 30 digits, nesting at most JSON_DEPTH.
    `nonfinite`: NaN and Infinity are read as floats (a model's config.json writes them, e.g. Mamba's
    time_step_limit; model.config_check then refuses them wherever a count is expected)."""
    if isinstance(text, bytes):
        text = decode_text(text)
    try:
        obj = json.loads(text, parse_constant=float if nonfinite else _no_constant,
                         parse_float=float if nonfinite else _finite_float, parse_int=_bounded_int)
    except json.JSONDecodeError as e:
        raise UserError(f"{what} is not valid JSON (line {e.lineno}: {e.msg})") from None
    except ValueError as e:
        raise UserError(f"{what}: {e}; the file is damaged") from None
    except RecursionError:
        raise UserError(f"{what} nests deeper than any config or record (over {JSON_DEPTH} levels)") from None
    if _depth(obj, JSON_DEPTH) > JSON_DEPTH:
        raise UserError(f"{what} nests deeper than any config or record (over {JSON_DEPTH} levels)")
    return obj


def read_json(path: Path, limit: int = JSON_LIMIT, *, nonfinite: bool = False) -> Any:
    return loads(read_bytes(path, limit), str(path), nonfinite=nonfinite)


_SAFE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,127}$")


def safe_name(value: str, what: str) -> str:
    """A name that becomes one part of a file path (a GPU key, a model id with '/' as '--'): letters, digits and
    `._+-` only, no leading dot, so it can never leave its folder."""
    if not isinstance(value, str) or not _SAFE.match(value):
        raise UserError(f"{what} {str(value)[:60]!r} cannot name a file (letters, digits and ._+- only)")
    return value


def check_name(value: str, what: str) -> str:
    """A name given on the command line (model id, GPU): printable, at most NAME_LIMIT characters."""
    if len(value) > NAME_LIMIT:
        raise UserError(f"{what} is {len(value):,} characters long; no model or GPU name is (at most {NAME_LIMIT})")
    if any(not ch.isprintable() for ch in value):
        raise UserError(f"{what} {value[:60]!r} holds control characters (a newline?); give the name alone")
    return value


SECONDS_LIMIT = 30 * 24 * 3600  # no startup, request or poll waits longer; time.sleep overflows far above


def positive_seconds(value: float, what: str, *, allow_zero: bool = False) -> float:
    """A time option: a finite number of seconds above zero (or zero where that means 'off')."""
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) or value < 0 or (
            value == 0 and not allow_zero) or value > SECONDS_LIMIT:
        raise UserError(f"{what} {value!r}: give a number of seconds above 0, at most {SECONDS_LIMIT:,} (30 days)")
    return float(value)
