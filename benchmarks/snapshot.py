"""Every answer `predict --json` gives over the bundled models and the model fixtures x 3 GPUs x 6 flag sets, and
`accuracy.py --json`, as one JSON file: a change meant to preserve behaviour (a refactor) must leave it identical.

    python benchmarks/snapshot.py > before.json   # ... change ...
    python benchmarks/snapshot.py > after.json && cmp before.json after.json
"""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GPUS = ("rtx-4060-ti-16gb", "h100", "h200")
FLAG_SETS = (
    (),
    ("--max-model-len", "8192"),
    ("--kv-cache-dtype", "fp8", "--max-num-seqs", "64"),
    ("--enforce-eager", "--max-num-batched-tokens", "2048"),
    ("--mtp", "2", "--vllm-version", "0.26"),
    ("--tensor-parallel-size", "2", "--vllm-version", "0.20"),
)


def models() -> list[str]:
    bundled = sorted(p.stem for p in (ROOT / "profiles" / "models").glob("*.json"))
    folders = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests" / "fixtures" / "models").iterdir()
                     if (p / "config.json").is_file())
    return bundled + folders


def answer(argv: list[str]) -> dict:
    from vrambudget.cli import main

    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        sys.argv = ["vrambudget", *argv]
        try:
            main()
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
    text = out.getvalue()
    try:
        body = json.loads(text) if text.strip() else None
    except json.JSONDecodeError:
        body = text
    return {"exit": code, "out": body, "err": err.getvalue()}


def main() -> None:
    snap: dict = {"predict": {}}
    for m in models():
        for g in GPUS:
            for flags in FLAG_SETS:
                argv = ["predict", "--model", m, "--gpu", g, *flags, "--json"]
                snap["predict"][" ".join(argv[1:])] = answer(argv)
    acc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "accuracy.py"), "--json"], capture_output=True,
                         text=True, cwd=ROOT, check=False)
    snap["accuracy"] = {"exit": acc.returncode, "out": acc.stdout, "err": acc.stderr}
    json.dump(snap, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
