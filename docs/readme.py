"""Regenerate the README's command blocks from the commands themselves, or check that they have not drifted.

A block is a fenced code block right after a marker line:

    <!-- run: vrambudget ARGS -->      the block is `$ vrambudget ARGS`, then what it prints
    <!-- output: vrambudget ARGS -->   the block is only what it prints (the command is shown above it)
    <!-- run, first N lines: vrambudget ARGS -->   an excerpt: the command and the first N lines it prints

Each command runs in-process from the repository root as a user's shell would run it (globs expanded; stdout, then
stderr), with nothing of this machine in it: an empty user data folder (no fitted profiles; shown as the default
~/.local/share/vrambudget where a command prints it), no PYTORCH_CUDA_ALLOC_CONF or VLLM_* variables, and no
installed vLLM detected (the default version is then the newest modelled, as on a machine without vLLM).

    python docs/readme.py           rewrite README.md
    python docs/readme.py --check   exit 1 and name the blocks that differ (tests/test_readme.py runs this)
"""

from __future__ import annotations

import contextlib
import glob
import io
import os
import re
import shlex
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
FILES = (README, ROOT / "docs" / "accuracy.md")  # every file whose command blocks are regenerated
MARKER = re.compile(r"^<!-- (run|output)(, first (\d+) lines)?: vrambudget (.+?) -->\n```[a-z]*\n.*?^```\n",
                    re.M | re.S)


def run(args: str) -> str:
    """What `vrambudget ARGS` prints (stdout, then stderr), run as on a clean machine."""
    from vrambudget import cli, vllm_rules

    saved_env, saved_argv, saved_cwd = dict(os.environ), sys.argv, os.getcwd()
    saved_installed = vllm_rules.installed_vllm
    out, err = io.StringIO(), io.StringIO()
    with tempfile.TemporaryDirectory() as home:
        try:
            for k in list(os.environ):
                if k.startswith("VLLM_") or k in ("PYTORCH_CUDA_ALLOC_CONF", "VRAMBUDGET_DEBUG"):
                    del os.environ[k]
            os.environ["VRAMBUDGET_HOME"] = home
            os.environ["PATH"] = os.path.join(home, "no-bin")  # no vllm on PATH: the same output on every machine
            vllm_rules.installed_vllm = lambda: None
            os.chdir(ROOT)
            words = [w for a in shlex.split(args) for w in (sorted(glob.glob(a)) if "*" in a else [a])]
            sys.argv = ["vrambudget", *words]
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                try:
                    cli.main()
                except SystemExit:
                    pass
        finally:
            os.environ.clear()
            os.environ.update(saved_env)
            sys.argv = saved_argv
            vllm_rules.installed_vllm = saved_installed
            os.chdir(saved_cwd)
    text = (out.getvalue() + err.getvalue()).replace(home, "~/.local/share/vrambudget")
    if "error: vrambudget failed" in text:  # not the README's to show: this environment cannot run it
        raise SystemExit(f"docs/readme.py: `vrambudget {args}` fails here ({text.strip()[:200]}); run it where "
                         "vrambudget is installed (pip install '.[test]')")
    return text.rstrip("\n") + "\n"


def render(text: str) -> str:
    """The README with every marked block regenerated."""
    def block(m: re.Match[str]) -> str:
        kind, excerpt, lines, args = m.groups()
        shown = f"$ vrambudget {args}\n" if kind == "run" else ""
        out = run(args)
        if lines:
            out = "".join(out.splitlines(True)[:int(lines)])
        return f"<!-- {kind}{excerpt or ''}: vrambudget {args} -->\n```\n{shown}{out}```\n"

    return MARKER.sub(block, text)


def drifted(text: str) -> list[str]:
    """The commands whose block differs from what they print now."""
    return [f"vrambudget {m.group(4)}" for m in MARKER.finditer(text) if render(m.group(0)) != m.group(0)]


def main() -> int:
    sys.path.insert(0, str(ROOT))
    stale_any = False
    for path in FILES:
        text = path.read_text()
        if "--check" in sys.argv:
            for cmd in drifted(text):
                stale_any = True
                print(f"{path.name} block drifted: {cmd} (python docs/readme.py regenerates it)")
            continue
        new = render(text)
        if new != text:
            tmp = path.with_suffix(".md.tmp")
            tmp.write_text(new)
            tmp.replace(path)
        print(f"{len(MARKER.findall(text))} blocks; {path.relative_to(ROOT)} {'rewritten' if new != text else 'unchanged'}")
    return 1 if stale_any else 0


if __name__ == "__main__":
    sys.exit(main())
