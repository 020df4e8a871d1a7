"""Answer first (issue 7): the headline lines, the JSON keys, the table's two boots and `plan`."""

import json

from typer.testing import CliRunner

from vrambudget.cli import _mtp_default, app

runner = CliRunner()


def run(*a):
    return runner.invoke(app, _mtp_default(list(a)))


def test_predict_opens_with_both_boots_and_the_fix():
    # 64 seqs: vLLM's default 256 is refused there (tests/test_start_checks.py)
    r = run("predict", "--gpu", "4060ti", "--mtp", "--gmu", "0.95", "--max-num-seqs", "64")
    first, *lines = r.output.splitlines()
    # the first line names what the answer is for: the model (a default, said so), the GPU and the vLLM version
    assert first.startswith("For qwen3.5-9b-awq on NVIDIA GeForce RTX 4060 Ti 16GB (15.70 GiB), vLLM 0.33")
    assert "[the default model: -m names yours]" in first
    assert lines[0].startswith("Longest context: ") and "first boot" in lines[0] and "after a restart" in lines[0]
    assert "does not start: pass --max-model-len" in lines[1]
    assert any(ln.startswith("Not chosen by you (vLLM") and "max_num_batched_tokens 2048" in ln for ln in lines[:6])
    assert r.output.index("Longest context") < r.output.index("term ")  # before any table


def test_json_adds_first_boot_and_restart_ceilings():
    out = json.loads(run("predict", "--gpu", "4060ti", "--mtp", "--kv-cache-dtype", "fp8", "--max-num-seqs", "8",
                         "--vllm-version", "0.20.2", "--gmu", "0.90", "--max-model-len", "65536", "--json").output)
    assert out["max_model_len_ceiling_first_boot"] < 65536 <= out["max_model_len_ceiling_restart"]
    assert out["starts_first_boot"] is False and out["starts_restart"] is True
    assert "requested_bytes" in out and "fits" in out  # every earlier key stays


def test_table_shows_first_boot_and_restart():
    t = json.loads(run("table", "--gpu", "4060ti", "--kv-cache-dtype", "fp8", "--max-num-seqs", "8", "--json",
                       "--target-context", "64k").output)
    row = t["rows"][10]
    assert row["ceilings_first_boot"]["graphs"] < row["ceilings"]["graphs"]
    assert row["ceilings_first_boot"]["eager"] == row["ceilings"]["eager"]
    assert t["min_gmu_first_boot"]["graphs"] > t["min_gmu"]["graphs"]
    text = run("table", "--gpu", "4060ti", "--kv-cache-dtype", "fp8", "--max-num-seqs", "8").output
    assert " / " in text and "first boot after a change / restart" in text


def test_plan_picks_graphs_and_mtp_where_it_fits_and_not_beyond():
    base = ["plan", "--gpu", "4060ti", "--kv-cache-dtype", "fp8", "--max-num-seqs", "8", "--enable-prefix-caching",
            "--vllm-version", "0.20.2", "--checkpoint", "org/Qwen3.5-9B-AWQ", "--json"]
    short = json.loads(run(*base, "--target-context", "64k").output)
    assert short["chosen"].startswith("CUDA graphs + MTP") and "--speculative-config" in short["command"]["argv"]
    # FlashInfer's two first-request workspaces put vLLM's pick at the edge there: the same speed class with
    # TRITON_ATTN, which the model says serves, comes first (issue 23), and the command says so
    fi, tri = short["options"][0], short["options"][1]
    assert fi["verdict"] == "at the edge" and tri["attention_backend"] == "TRITON_ATTN" and tri["verdict"] == "yes"
    assert short["chosen"] == "CUDA graphs + MTP, TRITON_ATTN" and "TRITON_ATTN" in short["command"]["argv"]
    long = json.loads(run(*base, "--target-context", "240k").output)
    assert long["chosen"] != "CUDA graphs + MTP"
    nothing = run("plan", "--model", "qwen3.5-27b", "--gpu", "4060ti", "--target-context", "200k")
    assert nothing.exit_code == 1 and "Would (each checked): --gpu " in nothing.output
    # issue 37: two RTX 4090s do not hold Qwen3.5-27B with 64k (TP 2 is planned, not proposed blindly)
    tp = run("plan", "--model", "qwen3.5-27b", "--gpu", "rtx4090", "--target-context", "64k")
    assert tp.exit_code == 1 and "tensor-parallel-size" not in tp.output
    tp_ok = run("plan", "--model", "qwen3.5-9b", "--gpu", "4060ti", "--target-context", "256k")
    assert "--tensor-parallel-size 2 on two NVIDIA GeForce RTX 4060 Ti 16GB (eager at GMU" in tp_ok.output


def test_plan_on_the_default_layout_profile_prints_a_command_with_a_marked_placeholder():
    # issue 24: the first command a new user tries; the plan is the layout's, only the model argument is left open
    r = run("plan", "--gpu", "4060ti", "--target-context", "100000")
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert lines[0].startswith("100,000 tokens of qwen3.5-9b-awq on NVIDIA GeForce RTX 4060 Ti 16GB")
    cmd = next(x for x in lines if x.startswith("vllm serve "))
    assert cmd.startswith("vllm serve '<your-qwen3.5-9b-awq-checkpoint>' ") and "--max-model-len 100000" in cmd
    assert lines[-1].startswith("note: <your-qwen3.5-9b-awq-checkpoint> stands for your checkpoint")
    out = json.loads(run("plan", "--gpu", "4060ti", "--target-context", "100000", "--json").stdout)
    assert out["command"]["model_placeholder"] == "<your-qwen3.5-9b-awq-checkpoint>" and "--checkpoint" in \
        out["command"]["fill"]
    given = json.loads(run("plan", "--gpu", "4060ti", "--target-context", "100000", "--checkpoint", "me/awq",
                           "--json").stdout)
    assert given["command"]["argv"][2] == "me/awq" and "model_placeholder" not in given["command"]


def test_bad_values_are_one_line_errors():
    for args in (["predict", "--available-kv-gib", "-3"], ["predict", "--gpu-memory", ""],
                 ["predict", "--prompt-tokens", "0"], ["table", "--gmu-step", "0"], ["plan", "--target-context", "x"]):
        r = run(*args)
        assert r.exit_code == 2 and r.output.startswith("error: ") and r.output.count("\n") == 1, args
