"""`explain` on real logs and `serve-cmd` output that survives systemd, shells and compose."""

import json
import re
import shlex
import shutil
import subprocess

import pytest
from typer.testing import CliRunner

from vrambudget.cli import app
from vrambudget.comparison import compare_file, explain_json, meaning

from .conftest import FIXTURES, LOGS

runner = CliRunner()
ALL_LOGS = sorted(LOGS.glob("*.log"))


@pytest.mark.parametrize("path", ALL_LOGS, ids=[p.stem for p in ALL_LOGS])
def test_explain_recovers_logged_figures_and_residuals_equal_predict_error(path):
    r = runner.invoke(app, ["explain", str(path), "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    cmp = compare_file(path)
    # the residual column is exactly predict's error for the same inputs
    assert [t["difference_gib"] for t in out["terms"]] == [None if e is None else round(e, 4) for *_, e in cmp.rows]
    terms = {t["term"]: t for t in out["terms"]}
    assert terms["available KV cache"]["logged_gib"] == cmp.facts.available_kv_gib
    assert abs(terms["available KV cache"]["difference_gib"]) <= 0.15
    assert out["outcome"] == "started" and out["inputs"]["gpu"] == "NVIDIA H200"


def test_explain_a_failed_startup_in_plain_words():
    path = FIXTURES / "probe-vllm-0.20.2-h200" / "p9b" / "startup-01.log"
    text = meaning(compare_file(path))
    assert text.startswith("max_model_len 96,480 needs 1.82 GiB of KV cache, 1.81 GiB were left")
    assert "the ceiling at this GMU is 95,408" in text and "raise GMU to 0.15" in text and "drop MTP" in text
    r = runner.invoke(app, ["explain", str(path)])
    assert "KV_TOO_SMALL" in r.output and "available KV cache" in r.output


def test_explain_recovers_flags_from_the_log():
    out = explain_json(compare_file(LOGS / "qwen3.5-9b_kv-fp8_graphs_mtp2_gmu0.17.log"))
    i = out["inputs"]
    assert (i["gpu_memory_utilization"], i["kv_cache_dtype"], i["enforce_eager"], i["num_speculative_tokens"],
            i["max_num_seqs"], i["compile_cache"]) == (0.17, "fp8", False, 2, 8, "cold")


def test_explain_unreadable_log_is_one_line():
    r = runner.invoke(app, ["explain", "/nonexistent/x.log"])
    assert r.exit_code == 2 and r.output == "error: /nonexistent/x.log does not exist\n"


SERVE = ["serve-cmd", "--model", "qwen3.5-4b", "--gpu", "4060ti", "--mtp", "2", "--kv-cache-dtype", "fp8",
         "--max-num-seqs", "8", "--enable-prefix-caching", "--vllm-version", "0.20.2"]


def _exec_start_argv(unit: str) -> list[str]:
    line = next(x for x in unit.splitlines() if x.startswith("ExecStart="))
    # systemd splits ExecStart like a shell without expansions: whitespace, '...' and "..." quoting
    return shlex.split(line[len("ExecStart="):].replace("%%", "%"))


def test_systemd_unit_keeps_json_intact(tmp_path):
    r = runner.invoke(app, SERVE + ["--format", "systemd", "--margin", "5%", "--vllm-bin", "/bin/true"])
    assert r.exit_code == 0, r.output
    unit = r.stdout
    assert "Restart=on-failure" in unit
    argv = _exec_start_argv(unit)
    spec = json.loads(argv[argv.index("--speculative-config") + 1])
    assert spec == {"method": "mtp", "num_speculative_tokens": 2}
    assert "'{\"method\":\"mtp\",\"num_speculative_tokens\":2}'" in unit  # single-quoted, no backslashes
    mml = int(argv[argv.index("--max-model-len") + 1])
    pred = json.loads(runner.invoke(app, ["predict", *SERVE[1:], "--max-model-len", "auto", "--json"]).stdout)
    ceiling = pred["max_model_len_ceiling"]
    assert mml % pred["block_size"] == 0 and ceiling * 0.95 - pred["block_size"] <= mml <= ceiling * 0.95
    if shutil.which("systemd-analyze"):
        f = tmp_path / "vllm-test.service"
        f.write_text(unit)
        res = subprocess.run(["systemd-analyze", "verify", str(f)], capture_output=True, text=True)
        assert res.returncode == 0 and "ExecStart" not in res.stderr, res.stderr


def test_shell_and_json_formats_and_ceiling_warning():
    r = runner.invoke(app, SERVE + ["--format", "shell"])
    line = r.stdout.strip()
    argv = shlex.split(line)
    assert argv[:3] == ["vllm", "serve", "Qwen/Qwen3.5-4B"]
    assert json.loads(argv[argv.index("--speculative-config") + 1])["method"] == "mtp"
    assert "within one block" in r.stderr  # no margin: right at the ceiling
    j = json.loads(runner.invoke(app, SERVE + ["--format", "json"]).stdout)
    assert j["argv"][0] == "vllm" and j["max_model_len"] == j["ceiling"]


def test_compose_lists_arguments_without_shell_quoting():
    out = runner.invoke(app, SERVE + ["--format", "compose", "--margin", "4096"]).stdout
    assert "image: vllm/vllm-openai:v0.20.2" in out and "restart: on-failure" in out
    items = [json.loads(m) for m in re.findall(r"^      - (.*)$", out.split("command:")[1], flags=re.M)]
    assert {"method": "mtp", "num_speculative_tokens": 2} == json.loads(items[items.index("--speculative-config") + 1])


def test_ngram_on_hybrid_warns_and_awq_profile_gets_a_marked_placeholder():
    r = runner.invoke(app, ["serve-cmd", "--model", "qwen3.5-9b", "--gpu", "h200", "--speculative-config",
                            '{"method":"ngram","num_speculative_tokens":3}'])
    assert "corrupt the recurrent state" in r.stderr and "use MTP" in r.stderr
    r = runner.invoke(app, ["serve-cmd", "--gpu", "4060ti"])  # the profile models a layout, not one upload
    assert r.exit_code == 0 and r.stdout.startswith("vllm serve '<your-qwen3.5-9b-awq-checkpoint>' --port 8000")
    assert "replace it with its folder or Hugging Face id, or pass --checkpoint" in r.stderr
    r = runner.invoke(app, ["serve-cmd", "--gpu", "4060ti", "--format", "json"])
    out = json.loads(r.stdout)
    assert out["model_placeholder"] == out["argv"][2] == "<your-qwen3.5-9b-awq-checkpoint>" and "--checkpoint" in out["fill"]
    r = runner.invoke(app, ["probe", "--gpu", "4060ti"])
    assert r.exit_code == 2 and "--model" in r.output and "Traceback" not in r.output  # a probe needs a real one
    r = runner.invoke(app, ["serve-cmd", "--gpu", "4060ti", "--checkpoint", "/models/Qwen3.5-9B-AWQ", "--mtp", "2",
                            "--max-num-seqs", "8", "--kv-cache-dtype", "fp8"])
    assert r.exit_code == 0 and "cold torch.compile" in r.stderr


def test_serve_cmd_out_never_replaces_a_file_silently(tmp_path):
    target = tmp_path / "vllm.service"
    target.write_text("mine")
    args = SERVE + ["--format", "systemd", "--out", str(target)]
    r = runner.invoke(app, args)
    assert r.exit_code == 2 and "--force" in r.output and target.read_text() == "mine"
    assert runner.invoke(app, args + ["--force"]).exit_code == 0 and "ExecStart=" in target.read_text()
