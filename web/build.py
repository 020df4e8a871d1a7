#!/usr/bin/env python3
"""Build the static web page: `python web/build.py [--out web/dist]`.

The folder it writes is everything a static host (GitHub Pages, `python -m http.server`) serves; the page loads
nothing from anywhere else:

    index.html, app.js, style.css       the page (web/)
    pyodide/                            Pyodide's runtime, from the npm package `pyodide` (PYODIDE_VERSION, checked
                                        against its npm integrity hash): the wasm, its JS loader, the standard library
    app-<hash>.zip                      vrambudget's package with its bundled profiles (vrambudget/profiles/, where
                                        profiles.bundled_dir finds them in a wheel), the page's Python side
                                        (vrambudget_web.py) and tabulate (the CLI's text renderer's one dependency,
                                        copied from this environment's install); unpacked into Pyodide's file system
    snapshot-<hash>.bin.gz              Pyodide's memory with that package imported and one answer given, made with
                                        Node.js (web/snapshot.mjs): the page restores it instead of booting Python
                                        (without Node.js the build leaves it out and the page boots as before)

Pyodide 314.0.7 restores a snapshot into memory it does not grow first (its loader's INITIAL_MEMORY is not read by
this build's wasm, which defines its own memory): the build patches that one statement of pyodide.asm.mjs to grow
the memory to the snapshot's size (SNAPSHOT_PATCH), after the tarball's integrity check.

The npm tarball is fetched once with `npm pack` into a cache folder (--cache, default web/.cache); after that the
build runs offline. `--pyodide-tgz FILE` uses a tarball you fetched yourself (checked against the same hash).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

PYODIDE_VERSION = "314.0.7"  # Python 3.14; npm's dist.integrity of pyodide-314.0.7.tgz:
PYODIDE_INTEGRITY = "sha512-0YvXxEhfEdpLfb/XkM2BFAeMROq0iMUX2bzzH9pOttyMcWkwq+HbE5uyuGD82LN7y2q+SNvi/6V5JEsOlD2R1A=="
# What the page needs from the package (the rest: type declarations, source maps, demo consoles).
PYODIDE_FILES = ("pyodide.mjs", "pyodide.asm.mjs", "pyodide.asm.wasm", "python_stdlib.zip", "pyodide-lock.json",
                 "package.json")

# restoreSnapshot's copy into the heap, and the same with the memory grown to the snapshot's size first
SNAPSHOT_PATCH = ("let s=(new TextDecoder).decode(i),l=JSON.parse(s);return Module.HEAP8.set(t),l}",
                  "let s=(new TextDecoder).decode(i),l=JSON.parse(s);if(t.length>Module.HEAP8.length)"
                  "{Module.growMemory(t.length)}return Module.HEAP8.set(t),l}")

WEB = Path(__file__).resolve().parent
REPO = WEB.parent
PAGE_FILES = ("index.html", "app.js", "style.css")


class BuildError(Exception):
    pass


def integrity(data: bytes) -> str:
    return "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode()


def pyodide_tarball(cache: Path, given: Path | None) -> bytes:
    """The pinned pyodide npm tarball: --pyodide-tgz, else the cache, else `npm pack` into the cache."""
    name = f"pyodide-{PYODIDE_VERSION}.tgz"
    path = given or cache / name
    if not path.is_file():
        if given:
            raise BuildError(f"{given}: no such file")
        npm = shutil.which("npm")
        if npm is None:
            raise BuildError(f"{path} is not cached and npm is not installed: install npm (Node.js), or fetch "
                             f"{name} (`npm pack pyodide@{PYODIDE_VERSION}` anywhere) and pass --pyodide-tgz")
        cache.mkdir(parents=True, exist_ok=True)
        print(f"fetching pyodide@{PYODIDE_VERSION} with npm pack into {cache}", file=sys.stderr)
        r = subprocess.run([npm, "pack", f"pyodide@{PYODIDE_VERSION}", "--pack-destination", str(cache)],
                           capture_output=True, text=True)
        if r.returncode != 0 or not path.is_file():
            raise BuildError(f"npm pack pyodide@{PYODIDE_VERSION} failed: {(r.stderr or r.stdout).strip()[-500:]}")
    data = path.read_bytes()
    if integrity(data) != PYODIDE_INTEGRITY:
        raise BuildError(f"{path}: not pyodide {PYODIDE_VERSION} as npm publishes it (integrity {integrity(data)[:30]}"
                         f"... != {PYODIDE_INTEGRITY[:30]}...); delete it and build again")
    return data


def extract_pyodide(tgz: bytes, dest: Path) -> None:
    dest.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(tgz), mode="r:gz") as tar:
        members = {m.name.removeprefix("package/"): m for m in tar.getmembers() if m.isfile()}
        for name in PYODIDE_FILES:
            if name not in members:
                raise BuildError(f"pyodide {PYODIDE_VERSION}'s tarball has no {name}")
            (dest / name).write_bytes(tar.extractfile(members[name]).read())


def _tree(root: Path, suffixes: tuple[str, ...] | None) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts
                  and (suffixes is None or p.suffix in suffixes))


def _tabulate_files() -> list[tuple[Path, str]]:
    """tabulate's installed source files (the CLI's text renderer imports it), as (file, name in the zip)."""
    from importlib import metadata

    try:
        dist = metadata.distribution("tabulate")
    except metadata.PackageNotFoundError:
        raise BuildError("tabulate is not installed here: install the project first (pip install '.[web]')") from None
    out = []
    for f in dist.files or ():
        if f.suffix == ".py" and f.parts[0] == "tabulate":
            out.append((Path(f.locate()), str(f)))
    if not out:
        raise BuildError("tabulate's installed files were not found (its RECORD lists no tabulate/*.py)")
    return out


def app_zip() -> tuple[bytes, dict[str, str]]:
    """vrambudget + its bundled profiles + the page's Python + tabulate, as one zip (fixed timestamps: the same
    sources give the same bytes)."""
    pkg, profiles = REPO / "vrambudget", REPO / "profiles"
    if not (profiles / "gpus.json").is_file():
        raise BuildError(f"{profiles} has no gpus.json: run the build from a checkout of the project")
    files: list[tuple[Path, str]] = [(p, "vrambudget/" + p.relative_to(pkg).as_posix()) for p in _tree(pkg, (".py",))]
    files += [(p, "vrambudget/profiles/" + p.relative_to(profiles).as_posix()) for p in _tree(profiles, None)]
    files += [(WEB / "vrambudget_web.py", "vrambudget_web.py")]
    files += _tabulate_files()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as z:
        for src, name in sorted(files, key=lambda f: f[1]):
            info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            z.writestr(info, src.read_bytes())
    from importlib import metadata

    return buf.getvalue(), {"files": str(len(files)), "tabulate": metadata.version("tabulate")}


def patch_snapshot_restore(pyodide: Path) -> None:
    """Let Pyodide's restoreSnapshot grow the wasm memory first (SNAPSHOT_PATCH): one exact statement, or refuse."""
    asm = pyodide / "pyodide.asm.mjs"
    text = asm.read_text(encoding="utf-8")
    old, new = SNAPSHOT_PATCH
    if text.count(old) != 1:
        raise BuildError(f"{asm}: restoreSnapshot is not the statement the snapshot patch expects (Pyodide changed?)")
    asm.write_text(text.replace(old, new), encoding="utf-8")


def memory_snapshot(dist: Path, zname: str) -> str | None:
    """The page's Pyodide snapshot (web/snapshot.mjs), named by its content; None where Node.js is not here."""
    node = shutil.which("node")
    if node is None:
        print("note: no Node.js here: the page is built without its memory snapshot (it boots Python on load)",
              file=sys.stderr)
        return None
    tmp = dist / "snapshot.tmp"
    r = subprocess.run([node, str(WEB / "snapshot.mjs"), str(dist), zname, str(tmp)], capture_output=True, text=True,
                       timeout=600)
    if r.returncode != 0 or not tmp.is_file():
        raise BuildError("the memory snapshot failed: " + (r.stderr.strip().splitlines() or ["no output"])[-1])
    name = f"snapshot-{hashlib.sha256(tmp.read_bytes()).hexdigest()[:12]}.bin.gz"
    tmp.rename(dist / name)
    return name


def git_commit() -> str | None:
    try:
        r = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short=12", "HEAD"], capture_output=True,
                           text=True, timeout=10)
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--", "vrambudget", "profiles",
                                "web"], capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return (r.stdout.strip() + ("+dirty" if dirty else "")) if r.returncode == 0 and r.stdout.strip() else None


def build(out: Path, cache: Path, tgz: Path | None = None, snapshot: bool = True) -> Path:
    out = out.resolve()
    if out == WEB or out == REPO or out in WEB.parents:
        raise BuildError(f"--out {out}: give a folder of its own (it is replaced)")
    sys.path.insert(0, str(REPO))
    from vrambudget import __version__

    tar = pyodide_tarball(cache, tgz)
    zdata, zinfo = app_zip()
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    extract_pyodide(tar, tmp / "pyodide")
    patch_snapshot_restore(tmp / "pyodide")
    zname = f"app-{hashlib.sha256(zdata).hexdigest()[:12]}.zip"  # a new name per content: no stale cache
    (tmp / zname).write_bytes(zdata)
    info = {"app_zip": zname, "pyodide": PYODIDE_VERSION, "vrambudget": __version__, "commit": git_commit(),
            "tabulate": zinfo["tabulate"], "snapshot": memory_snapshot(tmp, zname) if snapshot else None}
    html = (WEB / "index.html").read_text(encoding="utf-8")
    marker = '<script id="build-info" type="application/json">{}</script>'
    if marker not in html:
        raise BuildError(f"web/index.html lacks {marker}")
    html = html.replace(marker, f'<script id="build-info" type="application/json">{json.dumps(info)}</script>')
    (tmp / "index.html").write_text(html, encoding="utf-8")
    for name in PAGE_FILES[1:]:
        shutil.copy2(WEB / name, tmp / name)
    (tmp / ".nojekyll").write_text("")  # GitHub Pages: serve every file as it is
    (tmp / "build-info.json").write_text(json.dumps(info, indent=1) + "\n")
    shutil.rmtree(out, ignore_errors=True)
    os.replace(tmp, out)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Build the static vrambudget web page (Pyodide) into a folder.")
    ap.add_argument("--out", type=Path, default=WEB / "dist", help="the folder to write (replaced; default web/dist)")
    ap.add_argument("--cache", type=Path, default=WEB / ".cache", help="where the npm tarball is kept "
                    "(default web/.cache)")
    ap.add_argument("--pyodide-tgz", type=Path, help=f"pyodide-{PYODIDE_VERSION}.tgz fetched elsewhere")
    ap.add_argument("--no-snapshot", action="store_true", help="leave the memory snapshot out (the page then boots "
                    "Python on load)")
    a = ap.parse_args(argv)
    try:
        out = build(a.out, a.cache, a.pyodide_tgz, snapshot=not a.no_snapshot)
    except BuildError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    print(f"built {out} ({size / 1e6:.1f} MB): serve it with `python -m http.server -d {os.path.relpath(out)}` "
          "and open http://localhost:8000/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
