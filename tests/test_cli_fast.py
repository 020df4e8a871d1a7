"""The fast path of `predict` and `table` (commands/spec.py) answers exactly what typer answers, and hands
anything that is not plainly valid to typer."""

import sys

import pytest
from typer.testing import CliRunner

from vrambudget.cli import _mtp_default, app, fast

runner = CliRunner()

SAME = [
    ["predict"],
    ["predict", "--gpu", "4060ti", "--mtp", "--gmu", "0.95"],
    ["predict", "--gpu", "rtx3090", "--model", "qwen3.6-27b-int4-autoround", "--kv-cache-dtype", "fp8", "--json"],
    ["predict", "--gpu=h100", "--enforce-eager", "--max-model-len", "32768", "--max-num-seqs", "4"],
    ["predict", "--gpu", "4060ti", "--target-context", "64k", "--json"],
    ["predict", "--gpu", "4060ti", "--available-kv-gib", "3.5"],
    ["predict", "--gpu", "4060ti", "--gmu", "0.99", "--enforce-eager", "--kv-cache-dtype", "fp8"],
    ["predict", "--gmu", "1.5"],
    ["predict", "--model", "no-such-model"],
    ["table", "--gpu", "4060ti", "--gmu-min", "0.9", "--gmu-max", "0.95"],
    ["table", "--gpu", "rtx4090", "--mtp", "3", "--json", "--gmu-min", "0.93"],
]


def via_fast(argv, capsys):
    code = 0
    try:
        assert fast(argv), argv
    except SystemExit as e:
        code = e.code or 0
    cap = capsys.readouterr()
    return code, cap.out, cap.err


@pytest.mark.parametrize("argv", SAME, ids=[" ".join(a) for a in SAME])
def test_fast_path_prints_what_typer_prints(argv, capsys):
    argv = _mtp_default(argv)
    code, out, err = via_fast(argv, capsys)
    r = runner.invoke(app, argv)
    assert (code, out, err) == (r.exit_code, r.stdout, r.stderr)
    assert (out + err).strip()


@pytest.mark.parametrize("argv", [
    ["predict", "--help"], ["predict", "--gpu"], ["predict", "--gmu", "high"],
    ["predict", "--no-such-flag"], ["predict", "--json=yes"], ["table", "--enforce-eager"],
    ["table", "--mtp", "9"], ["plan"], ["probe", "--dry-run"], [],
])
def test_anything_not_plainly_valid_goes_to_typer(argv):
    assert fast(_mtp_default(argv)) is False


@pytest.mark.parametrize("argv", [["predict", "--json", "--max-num-seqs", "8"], ["table", "--gpu", "4060ti"]])
def test_fast_path_imports_only_what_it_needs(argv):
    import subprocess

    heavy = ("typer", "click", "scipy", "huggingface_hub", "matplotlib", "pynvml", "numpy")
    code = (f"import sys; from vrambudget.cli import fast\ntry: fast({argv!r})\nexcept SystemExit: pass\n"
            f"print([m for m in {heavy!r} if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout  # exit 1: a "no"
    assert out.strip().splitlines()[-1] == "[]"
