"""Where profiles live and how they are read and written (the only file I/O of the model side).

Bundled profiles ship inside the wheel as `vrambudget/profiles/` (the repository's top-level
`profiles/`, mapped there at build time); an editable checkout reads `profiles/` directly.
Profiles the user fits are written to the user data dir and take precedence.
"""

from __future__ import annotations

import json
import os
from functools import lru_cache
from pathlib import Path
from typing import Any

from .errors import UserError


@lru_cache(maxsize=1)
def bundled_dir() -> Path:
    """The bundled profiles folder (inside the installed package, or the checkout's profiles/)."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "profiles", here.parent / "profiles"):
        if (candidate / "gpus.json").is_file():
            return candidate
    raise UserError(f"bundled profiles are missing (looked in {here / 'profiles'}); reinstall vrambudget")


def user_dir() -> Path:
    """Per-user data: fitted profiles and probe runs ($VRAMBUDGET_HOME, else XDG data home)."""
    env = os.environ.get("VRAMBUDGET_HOME")
    if env:
        return Path(env)
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "vrambudget"


def read_text(path: Path) -> str:
    """A text file the user named (a log), as text (UTF-8 or UTF-16, bounded: inputs.read_text); a folder, a
    device, a missing or unreadable file is a one-line error."""
    from .inputs import read_text as bounded

    return bounded(path)


def read_json(path: Path, *, nonfinite: bool = False) -> Any:
    """A JSON file as strict, bounded JSON (inputs.read_json: finite numbers, bounded size and nesting);
    `nonfinite`: a model config's NaN and Infinity are read."""
    from .inputs import read_json as bounded

    return bounded(path, nonfinite=nonfinite)


def _cannot_write(path: Path, e: OSError) -> UserError:
    where = "VRAMBUDGET_HOME" if os.environ.get("VRAMBUDGET_HOME") else "VRAMBUDGET_HOME or XDG_DATA_HOME"
    return UserError(f"cannot write {path}: {e.strerror or e} in {path.parent}; make that folder writable, or point "
                     f"{where} (profiles) or --out (a file) at one you can write")


def write_text_atomic(path: Path, text: str) -> None:
    """Write through a temporary file and rename, so a crash never leaves half a file (and a failure leaves the
    old one as it was)."""
    import tempfile  # only where a file is written: it pulls in shutil, random, bz2 and lzma (~14 ms at start)

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    except OSError as e:
        raise _cannot_write(path, e) from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(e, OSError):
            raise _cannot_write(path, e) from None
        raise


def write_json_atomic(path: Path, data: Any) -> None:
    write_text_atomic(path, json.dumps(data, indent=2) + "\n")


def _finite(obj: Any) -> Any:
    """A record with every NaN or infinite float as null (JSON has neither; readers refuse them)."""
    if isinstance(obj, float):
        return obj if obj == obj and obj not in (float("inf"), float("-inf")) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def append_jsonl_atomic(path: Path, record: dict[str, Any]) -> None:
    """Append one JSON line with a single O_APPEND write: other writers' lines never interleave with it, and a crash
    can tear only the last line (read_jsonl skips a torn last line)."""
    line = (json.dumps(_finite(record), sort_keys=False, allow_nan=False) + "\n").encode()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    except OSError as e:
        raise _cannot_write(path, e) from None
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Records of a JSON-lines file. A torn last line (a crash mid-write leaves it without its newline) is skipped;
    any other line that is not a JSON object is a one-line error naming it."""
    from .inputs import read_text as bounded, loads

    if path.is_dir():
        raise UserError(f"{path} is a folder: give the records file (records.jsonl)")
    lines = bounded(path).split("\n")
    out = []
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rec = loads(line, f"{path} line {i}")
        except UserError:
            if i == len(lines):  # no newline after it: torn by a crash
                continue
            raise UserError(f"{path} line {i} is not JSON (or holds NaN, Infinity or out-of-range numbers); remove "
                            "that line (the others are kept)") from None
        if not isinstance(rec, dict):
            raise UserError(f"{path} line {i} is not a record (a JSON object); remove that line") from None
        out.append(rec)
    return out
