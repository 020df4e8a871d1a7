"""Where profiles live and how they are read and written (the only file I/O of the model side).

Bundled profiles ship inside the wheel as `vrambudget/profiles/` (the repository's top-level
`profiles/`, mapped there at build time); an editable checkout reads `profiles/` directly.
Profiles the user fits are written to the user data dir and take precedence.
"""

from __future__ import annotations

import errno
import json
import os
import stat
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
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
    """One line for a write the system refused, with what to do about its cause (a full disk is not a permission
    problem); whatever was at `path` before is left as it was."""
    if e.errno in (errno.ENOSPC, errno.EDQUOT):
        return UserError(f"cannot write {path}: {e.strerror or 'no space left'} in {path.parent} (the disk is full or "
                         "over quota); free some space or write elsewhere (nothing was changed)")
    if e.errno == errno.EROFS:
        return UserError(f"cannot write {path}: {path.parent} is on a read-only file system; write elsewhere "
                         "(nothing was changed)")
    where = "VRAMBUDGET_HOME" if os.environ.get("VRAMBUDGET_HOME") else "VRAMBUDGET_HOME or XDG_DATA_HOME"
    return UserError(f"cannot write {path}: {e.strerror or e} in {path.parent}; make that folder writable, or point "
                     f"{where} (profiles) or --out (a file) at one you can write")


def _not_a_file(mode: int) -> str | None:
    """What a file of this mode is when it is not a regular file (None for a regular file)."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    return "not a regular file"


def check_output(path: Path, flag: str | None = None) -> None:
    """Refuse, in one line, a target that writing a file would wrongly replace: a folder, a device (/dev/null), a
    named pipe, a socket, a symbolic link (vrambudget never replaces a link nor the file behind it), a read-only
    file. A missing path is fine (its folder is made when written). `flag` names the option in the message."""
    name = f"{flag} {path}" if flag else str(path)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    except OSError as e:  # a part of the path is a file (ENOTDIR), a loop, a name too long
        raise _cannot_write(path, e) from None
    if stat.S_ISLNK(st.st_mode):
        try:
            to = os.readlink(path)
        except OSError:
            to = "?"
        raise UserError(f"{name} is a symbolic link (to {to}); vrambudget does not replace links: give the path of "
                        "the file itself, or another name")
    kind = _not_a_file(st.st_mode)
    if kind == "a folder":
        raise UserError(f"{name} is a folder: give the name of a file (e.g. {path / 'NAME'})")
    if kind:
        raise UserError(f"{name} is {kind}, not a file: give the name of a file to write")
    if not os.access(path, os.W_OK):
        raise UserError(f"{name} is read-only: make it writable (chmod u+w), or give another name")


def _write_all(fd: int, data: bytes) -> None:
    """All of `data` to `fd` (os.write may write less than asked)."""
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _new_file_mode(path: Path) -> int:
    """The mode of the file a write replaces, else what the umask gives a new file (mkstemp's 0600 would hide it)."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        mask = os.umask(0)
        os.umask(mask)
        return 0o666 & ~mask


def write_bytes_atomic(path: Path, data: bytes, flag: str | None = None) -> None:
    """Write through a temporary file beside `path` and rename it over `path` only after a complete write (fsync'd):
    a crash, a full disk or a refused write leaves the old file as it was and no temporary file. A target that is
    not a regular file (a folder, a device, a pipe, a symbolic link) is refused first (check_output)."""
    import tempfile  # only where a file is written: it pulls in shutil, random, bz2 and lzma (~14 ms at start)

    check_output(path, flag)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as e:
        raise _cannot_write(path, e) from None
    try:
        try:
            os.fchmod(fd, _new_file_mode(path))
            _write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        check_output(path, flag)  # replaced meanwhile by a link, a folder or a device: still refuse it
        os.replace(tmp, path)
    except BaseException as e:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(e, OSError):
            raise _cannot_write(path, e) from None
        raise
    try:  # the rename itself, durable
        dfd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass


def write_text_atomic(path: Path, text: str, flag: str | None = None) -> None:
    """Text as UTF-8, atomically (write_bytes_atomic)."""
    write_bytes_atomic(path, text.encode("utf-8"), flag)


def write_json_atomic(path: Path, data: Any, flag: str | None = None) -> None:
    write_text_atomic(path, json.dumps(data, indent=2) + "\n", flag)


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """An exclusive advisory lock (fcntl.flock) for a read-modify-write of `path`, held on a lock file beside it
    (`.NAME.lock`): other vrambudget processes updating `path` wait; the kernel releases it if this one dies. The
    lock file is removed on release (nothing is left beside the user's file); a waiter that then holds the removed
    file's lock sees that the name now names another file, or none, and locks again."""
    import fcntl

    lock = path.with_name(f".{path.name}.lock")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise _cannot_write(path, e) from None
    while True:
        try:
            fd = os.open(lock, os.O_RDONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
        except OSError as e:
            raise _cannot_write(path, e) from None
        try:
            mine = os.fstat(fd)
            kind = _not_a_file(mine.st_mode)
            if kind:
                raise UserError(f"{lock} (the lock file of {path.name}) is {kind}: remove it")
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                now = os.stat(lock, follow_symlinks=False)
            except FileNotFoundError:
                now = None
        except BaseException:
            os.close(fd)
            raise
        if now is not None and (now.st_dev, now.st_ino) == (mine.st_dev, mine.st_ino):
            break
        os.close(fd)  # removed by the holder before us: lock the file that name holds now
    try:
        yield
    finally:
        try:
            os.unlink(lock)  # still holding the lock: no one else can hold this file's
        except OSError:
            pass
        os.close(fd)


def update_json(path: Path, change: Callable[[Any], Any], *, previous: Path | None = None,
                flag: str | None = None) -> Any:
    """Read-modify-write a JSON file under `locked(path)`: `change(old)` (None where there is none yet) gives what
    to write; the old content is kept at `previous` (if given). Concurrent updates each see the one before."""
    check_output(path, flag)
    if previous is not None:
        check_output(previous)
    with locked(path):
        try:
            old = read_json(path) if os.path.lexists(path) else None
        except UserError as e:  # not JSON: not what this update merges into, and left as it is
            raise UserError(f"{e}; it was left as it is: move it away{f', or give another {flag}' if flag else ''}") \
                from None
        new = change(old)
        if old is not None and previous is not None:
            write_json_atomic(previous, old)
        write_json_atomic(path, new, flag)
    return new


def write_profile(path: Path, data: dict[str, Any], flag: str | None = None) -> dict[str, Any]:
    """Write a fitted profile, merged into the one already at `path` (what this fit did not refit is kept, the
    sources add up) under a lock, so that concurrent fits of one profile lose nothing; the profile before is kept
    as *.previous.json. A file at `path` that is not a fitted profile is refused, not overwritten."""

    def merge(old: Any) -> dict[str, Any]:
        if old is None:
            return data
        if not (isinstance(old, dict) and isinstance(old.get("coefficients", {}), dict)
                and isinstance(old.get("fitted_from", []), list)):
            raise UserError(f"{path} is not a profile `vrambudget fit` wrote (no coefficients object); give "
                            f"another {flag or 'profile path'}, or move that file away")
        known = old.get("fitted_from", [])
        return {**data, "coefficients": {**old.get("coefficients", {}), **data["coefficients"]},
                "fitted_from": known + [f for f in data["fitted_from"] if f not in known]}

    return update_json(path, merge, previous=path.with_name(path.stem + ".previous.json"), flag=flag)


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
    """Append one JSON line with a single O_APPEND write of the whole line, under an exclusive flock of the file:
    other writers' lines never interleave with it. A line torn by an earlier crash (the file does not end in a
    newline) is closed first, so the new record starts on a line of its own. A failed write (a full disk) is cut
    back off, leaving the file as it was. A records file that is a folder, a device or a pipe is refused."""
    import fcntl

    line = (json.dumps(_finite(record), sort_keys=False, allow_nan=False) + "\n").encode()
    try:
        st = os.stat(path)
    except FileNotFoundError:
        pass
    except OSError as e:
        raise _cannot_write(path, e) from None
    else:
        kind = _not_a_file(st.st_mode)
        if kind:
            raise UserError(f"{path} is {kind}, not a records file: move it away (or give another runs folder)")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
    except OSError as e:
        raise _cannot_write(path, e) from None
    try:
        kind = _not_a_file(os.fstat(fd).st_mode)  # swapped for a pipe or a device since the check above
        if kind:
            raise UserError(f"{path} is {kind}, not a records file: move it away (or give another runs folder)")
        fcntl.flock(fd, fcntl.LOCK_EX)
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            line = b"\n" + line  # end the torn line: read_jsonl skips it, and this record stays whole
        try:
            _write_all(fd, line)
        except OSError as e:
            try:
                os.ftruncate(fd, size)  # no half record left behind
            except OSError:
                pass
            raise _cannot_write(path, e) from None
    finally:
        os.close(fd)  # releases the lock


class Records(list):
    """The records of a JSON-lines file; `torn`: the numbers of the torn lines skipped (or recovered from)."""

    torn: list[int]


def _torn(line: str) -> bool:
    """Whether a line that is not JSON is the start of a record cut short (a crash mid-write), not something else."""
    text = line.strip()
    if not text.startswith("{"):
        return False
    try:
        json.loads(text)
    except json.JSONDecodeError as e:
        rest = text[e.pos:]
        return (e.pos >= len(text) or e.msg.startswith("Unterminated string")  # cut inside a string
                or (e.msg.startswith("Invalid \\uXXXX") and len(rest) < 6)  # inside a \u escape
                or (e.msg == "Expecting value" and any(w.startswith(rest) for w in ("true", "false", "null"))))
    except ValueError:
        return False
    return False


def _after_torn(line: str, what: str) -> dict[str, Any] | None:
    """A whole record glued onto a torn one (an older vrambudget appended without ending the torn line): the record,
    else None."""
    from .inputs import loads

    starts = [k for k, ch in enumerate(line) if ch == "{" and k > 0][:256]
    for k in starts:
        if not _torn(line[:k]):
            continue
        try:
            rec = loads(line[k:], what)
        except UserError:
            continue
        if isinstance(rec, dict):
            return rec
    return None


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Records of a JSON-lines file. A torn line (a probe killed mid-write leaves the start of a record) is skipped,
    and a record an older vrambudget glued onto it is kept; either is said on stderr (where the file holds other
    records). Any other line that is not a JSON object is a one-line error naming it."""
    from .inputs import read_text as bounded, loads

    if path.is_dir():
        raise UserError(f"{path} is a folder: give the records file (records.jsonl)")
    lines = bounded(path).split("\n")
    out = Records()
    out.torn = []
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rec = loads(line, f"{path} line {i}")
        except UserError:
            glued = _after_torn(line, f"{path} line {i}")
            if glued is not None:
                out.torn.append(i)
                out.append(glued)
                continue
            if i == len(lines) or _torn(line):  # no newline after it, or the start of a record: torn by a crash
                out.torn.append(i)
                continue
            raise UserError(f"{path} line {i} is not JSON (or holds NaN, Infinity or out-of-range numbers); remove "
                            "that line (the others are kept)") from None
        if not isinstance(rec, dict):
            raise UserError(f"{path} line {i} is not a record (a JSON object); remove that line") from None
        out.append(rec)
    if out.torn and out:  # with no record at all, the caller's own line ("nothing to fit") says enough
        n = out.torn
        which = ", ".join(map(str, n[:5])) + (", ..." if len(n) > 5 else "")
        print(f"note: {path} line{'s' if len(n) > 1 else ''} {which}"
              " torn (a probe stopped mid-write): skipped, the other records read", file=sys.stderr)
    return out
