"""Copy one public vLLM startup log, verbatim, from a fetched repository snapshot into tests/fixtures/public-logs,
and print its sources.json entry (url at the snapshot's commit, the lines kept).

    python benchmarks/public/import_log.py MIRROR_GIT_DIR OWNER/NAME PATH NAME [--keep-all]

A log that goes on serving after its startup is kept up to and including vLLM's "Application startup complete" line
(the requests after it are left out, and the entry says so); anything else is kept whole. No line is edited.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEST = ROOT / "tests" / "fixtures" / "public-logs"


def startup_part(text: str) -> tuple[str, str]:
    """(the lines kept, how): up to vLLM's 'Application startup complete' line, else the whole text."""
    lines = text.splitlines(keepends=True)
    for i, line in enumerate(lines):
        if "Application startup complete" in line:
            if i + 1 < len(lines):
                return "".join(lines[:i + 1]), f"lines 1-{i + 1} of {len(lines)} (the startup; the requests after it left out)"
            break
    return text, f"whole file ({len(lines)} lines)"


def main(argv: list[str]) -> int:
    git_dir, repo, path, name = argv[:4]
    commit = subprocess.run(["git", "-C", git_dir, "rev-parse", "HEAD"], capture_output=True, text=True,
                            check=True).stdout.strip()
    text = subprocess.run(["git", "-C", git_dir, "show", f"{commit}:{path}"], capture_output=True, check=True).stdout
    body, kept = (text.decode(errors="surrogateescape"), "whole file") if "--keep-all" in argv else \
        startup_part(text.decode(errors="surrogateescape"))
    out = DEST / name
    if out.exists():
        print(f"{out} exists", file=sys.stderr)
        return 1
    out.write_bytes(body.encode(errors="surrogateescape"))
    print(json.dumps({name: {"url": f"https://github.com/{repo}/blob/{commit}/{path}", "kept": kept}}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
