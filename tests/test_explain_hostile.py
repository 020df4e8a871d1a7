"""explain on logs as people paste them (issue 36): two startups in one file, an args line a terminal wrapped, a
PowerShell (UTF-16) redirect, a context above the config's maximum, flags the log lacks, and the warning when the
log's own figures disagree with the deployment read from it. Built from a real lab log (vLLM 0.26.0, H100)."""

import json
import re
import textwrap
from pathlib import Path

from typer.testing import CliRunner

from vrambudget.cli import app
from vrambudget.logparse import parse_log, rejoin_wrapped, split_startups

LAB = Path(__file__).parent / "fixtures" / "lab-vllm-0.26.0-h100"
A = (LAB / "defaults" / "awq16-g-mtp2-s64.log").read_text()  # GMU 0.188371, 1.49 GiB available
B = (LAB / "families" / "phi4-e.log").read_text()
runner = CliRunner()


def explain(tmp_path, text: str | bytes, *args: str) -> tuple[int, dict, str]:
    path = tmp_path / "pasted.log"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    r = runner.invoke(app, ["explain", str(path), "--json", *args])
    return r.exit_code, json.loads(r.stdout) if r.exit_code == 0 else {}, r.stderr


def available(j: dict) -> float:
    return next(t["logged_gib"] for t in j["terms"] if t["term"] == "available KV cache")


def test_two_startups_in_one_file_are_explained_one_at_a_time(tmp_path):
    assert len(split_startups(A)) == 1 and len(split_startups(B)) == 1
    both = A + "\n" + B
    assert len(split_startups(both)) == 2
    code, last, _ = explain(tmp_path, both)
    assert code == 0 and last["startup"] == 2 and last["startups_in_log"] == 2
    assert available(last) == parse_log(B).available_kv_gib  # the last startup's figures, not a mix of both
    assert "holds 2 startups" in last["warnings"][0]
    code, first, _ = explain(tmp_path, both, "--boot", "1")
    assert code == 0 and available(first) == 1.49 and first["inputs"]["gpu_memory_utilization"] == 0.188371
    code, _, err = explain(tmp_path, both, "--boot", "3")
    assert code == 2 and "holds 2 startup(s)" in err


def test_a_wrapped_args_line_is_joined_back(tmp_path):
    lines = A.splitlines()
    i = next(n for n, x in enumerate(lines) if "non-default args" in x)
    wrapped = lines[:i] + textwrap.wrap(lines[i], 80, drop_whitespace=False, break_on_hyphens=False) + lines[i + 1:]
    assert len(wrapped) > len(lines) + 3
    assert rejoin_wrapped(wrapped) == lines
    code, j, err = explain(tmp_path, "\n".join(wrapped))
    assert code == 0 and j["inputs"]["gpu_memory_utilization"] == 0.188371 and not j["warnings"]


def test_utf16_log_from_powershell_reads_as_the_same_log(tmp_path):
    for encoding in ("utf-16", "utf-16-le"):  # with and without a byte order mark
        code, j, _ = explain(tmp_path, A.encode(encoding))
        assert code == 0 and available(j) == 1.49


def test_no_args_line_warns_and_flags_can_be_given(tmp_path):
    no_args = "\n".join(x for x in A.splitlines() if "non-default args" not in x)
    code, j, _ = explain(tmp_path, no_args, "--model", str(Path(__file__).parent / "fixtures/models/qwen3.5-9b-awq"))
    assert code == 0
    assert any("no 'non-default args' line" in w for w in j["warnings"])
    assert any("the log requested 14.91 GiB" in w for w in j["warnings"])  # defaults disagree with its own figure
    code, j, _ = explain(tmp_path, no_args, "--model", str(Path(__file__).parent / "fixtures/models/qwen3.5-9b-awq"),
                         "--gmu", "0.188371", "--max-num-seqs", "64", "--max-num-batched-tokens", "2048")
    assert code == 0 and not any("requested" in w for w in j["warnings"])
    assert j["inputs"]["gpu_memory_utilization"] == 0.188371


def test_a_flag_given_against_the_log_is_said(tmp_path):
    code, j, _ = explain(tmp_path, A, "--gmu", "0.5")
    assert code == 0 and any("gpu_memory_utilization 0.5 given, the log states 0.188371" in w for w in j["warnings"])
    assert any("the log requested 14.91 GiB" in w for w in j["warnings"])


def test_a_context_above_the_configs_maximum_is_explained_as_vllm_ran_it(tmp_path):
    lines = A.splitlines()
    i = next(n for n, x in enumerate(lines) if "non-default args" in x)
    lines[i] = lines[i].replace("'max_model_len': -1", "'max_model_len': 1048576")  # set past the config's 262,144
    code, j, err = explain(tmp_path, "\n".join(lines))
    assert code == 0, err
    assert j["inputs"]["max_model_len"] == 1048576


def test_damaged_values_in_the_args_are_said_not_guessed(tmp_path):
    lines = A.splitlines()
    i = next(n for n, x in enumerate(lines) if "non-default args" in x)
    lines[i] = re.sub(r"'gpu_memory_utilization': [0-9.]+", "'gpu_memory_utilization': 'most'", lines[i])
    code, j, _ = explain(tmp_path, "\n".join(lines))  # what it still states, no prediction compared
    assert code == 0 and j["partial"] and "non-default args hold a value" in j["no_prediction"]
    code, _, err = explain(tmp_path, "\n".join(lines), "--gpu", "h100")  # a flag given: the error is one line
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1
