"""serve-cmd on hostile input (a held-out round): names vLLM's parser would read as options, a DFlash drafter's
folder, ngram's n-gram lengths, local folders in a systemd unit and a compose service, and a vLLM that lives in a
virtual environment. Each class with its example and its generalisation."""

import argparse
import json
import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from vrambudget.cli import app
from vrambudget.deployment import Flags, resolve
from vrambudget.hardware import catalog as gpus
from vrambudget.logparse import flags_from_args
from vrambudget.model.checkpoint import resolve_model
from vrambudget.vllm_rules import rules_for

from .conftest import MODELS
from .test_servecmd_escaping import compose_command, compose_mounts, served_name, systemd_words

runner = CliRunner()
BASE = ["serve-cmd", "--gpu", "h100", "--model", "qwen3-8b", "--margin", "5%"]
DFLASH_BASE = ["serve-cmd", "--gpu", "h100", "--model", "qwen3.6-27b", "--max-model-len", "32768"]


def invoke(*args: str):
    return runner.invoke(app, list(args))


def ok(*args: str) -> str:
    r = invoke(*args)
    assert r.exit_code == 0, r.output
    return r.stdout


def refused(*args: str) -> str:
    r = invoke(*args)
    assert r.exit_code == 2 and r.stdout == "", r.output
    assert r.stderr.startswith("error: ") and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r.stderr
    return r.stderr


def vllm_serve_reads(argv: list[str]) -> argparse.Namespace:
    """`vllm serve`'s argv as vLLM reads it: argparse with the model as an optional positional (model_tag,
    entrypoints/common/cli_args.py) and options that take values or are flags (engine/arg_utils.py), after vLLM's
    own rewriting (utils/argparse_utils.py FlexibleArgumentParser.parse_args): a word beginning with '--' has '_'
    turned to '-' before any '=', and a word beginning with '-' holding a '.' (before any '=') becomes a dict
    option. Words this model of the parser would rewrite or read as options other than the ones written fail."""
    assert argv[:2] == ["vllm", "serve"]
    words = argv[2:]
    for w in words:
        if w.startswith("-"):
            key = w.split("=", 1)[0]
            assert key.startswith("--") and "." not in key and "_" not in key, f"vLLM rewrites {w!r}"
    p = argparse.ArgumentParser(prog="vllm serve", allow_abbrev=True, exit_on_error=False)
    p.add_argument("model_tag", nargs="?")
    p.add_argument("--served-model-name", nargs="+")
    p.add_argument("--speculative-config", type=json.loads)
    for flag in ("--port", "--gpu-memory-utilization", "--max-model-len", "--max-num-seqs",
                 "--max-num-batched-tokens", "--kv-cache-dtype", "--tensor-parallel-size"):
        p.add_argument(flag)
    for flag in ("--trust-remote-code", "--enforce-eager", "--enable-prefix-caching", "--language-model-only",
                 "--headless"):
        p.add_argument(flag, action="store_true")
    ns, extra = p.parse_known_args(words)
    assert extra == [], f"vLLM would not take {extra}"
    return ns


def shell_argv(text: str) -> list[str]:
    return shlex.split(text)


def exec_start(unit: str) -> list[str]:
    return systemd_words(next(x for x in unit.splitlines() if x.startswith("ExecStart="))[len("ExecStart="):])


def fake_vllm(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    exe = folder / "vllm"
    exe.write_text("#!/bin/sh\nexit 0\n")
    exe.chmod(0o755)
    return exe


# 1. a value vLLM's parser would read as an option ---------------------------------------------------------------

@pytest.mark.parametrize("value", ["--trust-remote-code", "-x", "--model=evil", "-O3", "--config", "-a.b", "--x_y"])
def test_a_checkpoint_that_vllm_would_read_as_an_option_is_refused_in_one_line(value):
    err = refused(*BASE, f"--checkpoint={value}")
    assert "--checkpoint" in err and "begins with '-'" in err and f"./{value}" in err


@pytest.mark.parametrize("fmt", ["shell", "systemd", "compose", "json"])
def test_a_folder_beginning_with_a_dash_is_passed_as_a_path(tmp_path, monkeypatch, fmt):
    monkeypatch.chdir(tmp_path)
    shutil.copytree(MODELS / "qwen3-8b", tmp_path / "--trust-remote-code")
    inside = str(tmp_path / "--trust-remote-code")
    for args in (["--model", "qwen3-8b", "--checkpoint=--trust-remote-code"],
                 ["--model", "qwen3-8b", "--checkpoint=./--trust-remote-code"], ["--model=--trust-remote-code"]):
        args = ["serve-cmd", "--gpu", "h100", *args, "--format", fmt]
        out = ok(*args, "--vllm-bin", "/usr/bin/vllm") if fmt == "systemd" else ok(*args)
        if fmt == "shell":
            argv = shell_argv(out)
        elif fmt == "systemd":
            argv = ["vllm", *exec_start(out)[1:]]
        elif fmt == "json":
            argv = json.loads(out)["argv"]
        else:
            cmd = compose_command(out)
            assert compose_mounts(out)[cmd[0]] == inside and cmd[0] == "/models/--trust-remote-code"
            argv = ["vllm", "serve", *cmd]
        ns = vllm_serve_reads(argv)
        assert not ns.trust_remote_code
        assert ns.model_tag == (inside if fmt != "compose" else "/models/--trust-remote-code")


@pytest.mark.parametrize("name", ["--trust-remote-code", "-a.b", "--x_y", "--model=evil", "--config", "-", "-1",
                                  "--served-model-name", "- spaced -"])
def test_a_served_name_beginning_with_a_dash_is_joined_with_equals(name):
    argv = shell_argv(ok(*BASE, f"--served-model-name={name}"))
    assert f"--served-model-name={name}" in argv and name not in argv
    ns = vllm_serve_reads(argv)
    assert ns.served_model_name == [name] and ns.model_tag == "Qwen/Qwen3-8B" and not ns.trust_remote_code
    unit = ok(*BASE, f"--served-model-name={name}", "--format", "systemd", "--vllm-bin", "/usr/bin/vllm")
    assert served_name(exec_start(unit)) == name
    assert served_name(compose_command(ok(*BASE, f"--served-model-name={name}", "--format", "compose"))) == name


def test_a_plain_served_name_keeps_its_own_word():
    argv = shell_argv(ok(*BASE, "--served-model-name", "my model"))
    assert argv[argv.index("--served-model-name") + 1] == "my model"
    assert vllm_serve_reads(argv).served_model_name == ["my model"]


# 2. a DFlash drafter keeps its folder ----------------------------------------------------------------------------

@pytest.fixture
def drafter(tmp_path, monkeypatch):
    """A local DFlash drafter folder (the bundled drafter's config) with a space in its name, cwd its parent."""
    from vrambudget.model.drafter import bundled_drafters

    folder = tmp_path / "drafters" / "my drafter"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(json.loads(bundled_drafters()["qwen3.6-27b-dflash"].read_text())
                                                   ["config"]))
    monkeypatch.chdir(tmp_path)
    return folder


def spec(argv: list[str]) -> dict:
    return json.loads(argv[argv.index("--speculative-config") + 1])


@pytest.mark.parametrize("given", ["drafters/my drafter", "./drafters/my drafter", "drafters/my drafter/config.json",
                                   "ABSOLUTE"])
def test_a_local_drafter_keeps_its_folder_absolute(drafter, given):
    given = str(drafter) if given == "ABSOLUTE" else given
    cfg = json.dumps({"method": "dflash", "model": given, "num_speculative_tokens": 5})
    argv = shell_argv(ok(*DFLASH_BASE, "--speculative-config", cfg))
    assert spec(argv) == {"method": "dflash", "model": str(drafter), "num_speculative_tokens": 5}
    assert json.loads(ok(*DFLASH_BASE, "--speculative-config", cfg, "--format", "json"))["argv"] == argv
    unit = ok(*DFLASH_BASE, "--speculative-config", cfg, "--format", "systemd", "--vllm-bin", "/usr/bin/vllm")
    assert spec(exec_start(unit))["model"] == str(drafter)
    text = ok(*DFLASH_BASE, "--speculative-config", cfg, "--format", "compose")
    inside = spec(compose_command(text))["model"]
    assert compose_mounts(text) == {inside: str(drafter)} and inside == "/models/my drafter"


def test_a_bundled_drafter_is_named_by_its_hugging_face_id():
    cfg = '{"method":"dflash","model":"qwen3.6-27b-dflash","num_speculative_tokens":5}'
    assert spec(shell_argv(ok(*DFLASH_BASE, "--speculative-config", cfg)))["model"] == "z-lab/Qwen3.6-27B-DFlash"


def test_a_drafter_from_a_log_keeps_its_folder(drafter):
    f = Flags(**flags_from_args({"speculative_config": {"method": "dflash", "model": "drafters/my drafter",
                                                        "num_speculative_tokens": 5}}), max_model_len=32768)
    d = resolve(resolve_model("qwen3.6-27b"), gpus.lookup("h100"), rules_for("0.26.0"), f)
    assert json.loads(d.speculative_config())["model"] == str(drafter)


# 3. ngram's prompt_lookup_min / prompt_lookup_max ----------------------------------------------------------------

@pytest.mark.parametrize("lookup", [{"prompt_lookup_min": 2, "prompt_lookup_max": 4}, {"prompt_lookup_max": 3},
                                    {"prompt_lookup_min": 1}, {}])
def test_ngram_lookup_lengths_are_kept(lookup):
    cfg = {"method": "ngram", "num_speculative_tokens": 3, **lookup}
    for fmt in ("shell", "json"):
        out = ok(*BASE, "--speculative-config", json.dumps(cfg), "--format", fmt)
        argv = shell_argv(out) if fmt == "shell" else json.loads(out)["argv"]
        assert spec(argv) == cfg
    unit = ok(*BASE, "--speculative-config", json.dumps(cfg), "--format", "systemd", "--vllm-bin", "/usr/bin/vllm")
    assert spec(exec_start(unit)) == cfg


def test_ngram_lookup_lengths_from_a_logs_args():
    args = {"speculative_config": {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 2,
                                   "prompt_lookup_max": 5}, "max_model_len": 32768}
    flags = flags_from_args(args)
    assert (flags["prompt_lookup_min"], flags["prompt_lookup_max"]) == (2, 5)
    d = resolve(resolve_model("qwen3-8b"), gpus.lookup("h100"), rules_for("0.26.0"), Flags(**flags))
    assert json.loads(d.speculative_config()) == args["speculative_config"]
    # vLLM prints the args' speculative_config as a JSON string where it was given as one
    flags = flags_from_args({"speculative_config": json.dumps(args["speculative_config"])})
    assert (flags["prompt_lookup_min"], flags["prompt_lookup_max"]) == (2, 5)


@pytest.mark.parametrize("lookup, words", [
    ({"prompt_lookup_min": 5, "prompt_lookup_max": 4}, ("prompt_lookup_min 5", "above")),
    ({"prompt_lookup_min": 0}, ("prompt_lookup_min",)),
    ({"prompt_lookup_max": True}, ("prompt_lookup_max",)),
    ({"prompt_lookup_max": "4"}, ("prompt_lookup_max",)),
    ({"prompt_lookup_max": 10 ** 400}, ("out of range",)),  # the JSON reader's own refusal
    ({"prompt_lookup_max": 10 ** 9}, ("prompt_lookup_max", "1 to 65536")),
])
def test_impossible_lookup_lengths_are_refused_in_one_line(lookup, words):
    err = refused(*BASE, "--speculative-config", json.dumps({"method": "ngram", "num_speculative_tokens": 3, **lookup}))
    assert "--speculative-config" in err and all(w in err for w in words)


# 4. local folders: absolute in a unit, mounted in compose --------------------------------------------------------

def test_a_relative_model_folder_is_absolute_in_the_unit_and_mounted_in_compose(tmp_path, monkeypatch):
    shutil.copytree(MODELS / "qwen3-8b", tmp_path / "models" / "my model")
    monkeypatch.chdir(tmp_path / "models")
    folder = str(tmp_path / "models" / "my model")
    for given in (["--model", "my model"], ["--model", "./my model"], ["--checkpoint", "my model"],
                  ["--checkpoint", "../models/my model"]):
        args = [*BASE, *given] if given[0] == "--checkpoint" else ["serve-cmd", "--gpu", "h100", *given]
        unit = ok(*args, "--format", "systemd", "--vllm-bin", "/usr/bin/vllm")
        words = exec_start(unit)
        assert words[2] == os.path.normpath(folder) and "WorkingDirectory" not in unit
        assert shell_argv(ok(*args))[2] == folder
        text = ok(*args, "--format", "compose")
        cmd = compose_command(text)
        assert cmd[0] == "/models/my model" and compose_mounts(text) == {"/models/my model": folder}
        vol = next(v for v in yaml.safe_load(text)["services"]["vllm"]["volumes"] if isinstance(v, dict))
        assert vol["type"] == "bind" and vol["read_only"] is True


def test_a_checkpoint_path_not_on_this_machine_is_still_mounted():
    text = ok(*BASE, "--checkpoint", "/srv/models/Qwen3-8B", "--format", "compose")
    assert compose_command(text)[0] == "/models/Qwen3-8B"
    assert compose_mounts(text) == {"/models/Qwen3-8B": "/srv/models/Qwen3-8B"}


def test_a_hub_id_is_neither_made_a_path_nor_mounted():
    text = ok(*BASE, "--checkpoint", "me/my-model", "--format", "compose")
    assert compose_command(text)[0] == "me/my-model" and compose_mounts(text) == {}


def test_a_folder_in_the_hugging_face_cache_is_read_through_its_mount(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    snap = tmp_path / ".cache" / "huggingface" / "hub" / "models--Qwen--Qwen3-8B" / "snapshots" / "abc"
    shutil.copytree(MODELS / "qwen3-8b", snap)
    text = ok("serve-cmd", "--gpu", "h100", "--model", str(snap), "--format", "compose")
    assert compose_command(text)[0] == "/root/.cache/huggingface/hub/models--Qwen--Qwen3-8B/snapshots/abc"
    assert compose_mounts(text) == {}  # ~/.cache/huggingface is mounted already; the snapshot's links resolve there


def test_two_local_folders_of_one_name_get_two_mount_points(drafter, tmp_path):
    shutil.copytree(MODELS / "qwen3.6-27b", tmp_path / "other" / "my drafter") if (MODELS / "qwen3.6-27b").exists() \
        else pytest.skip("no qwen3.6-27b fixture folder")
    cfg = json.dumps({"method": "dflash", "model": str(drafter), "num_speculative_tokens": 5})
    text = ok("serve-cmd", "--gpu", "h100", "--model", "other/my drafter", "--max-model-len", "32768",
              "--speculative-config", cfg, "--format", "compose")
    cmd = compose_command(text)
    assert compose_mounts(text) == {"/models/my drafter": str(tmp_path / "other" / "my drafter"),
                                    "/models/my drafter-2": str(drafter)}
    assert cmd[0] == "/models/my drafter" and spec(cmd)["model"] == "/models/my drafter-2"


# 5. systemd's ExecStart names vLLM by its absolute path ----------------------------------------------------------

def test_exec_start_uses_the_vllm_on_path(tmp_path, monkeypatch):
    exe = fake_vllm(tmp_path / "my venv" / "bin")
    monkeypatch.setenv("PATH", f"{exe.parent}{os.pathsep}/usr/bin{os.pathsep}/bin")
    r = invoke(*BASE, "--format", "systemd", "--speculative-config", '{"method":"mtp","num_speculative_tokens":2}',
               "--model", "qwen3.5-4b")
    assert r.exit_code == 0, r.output
    unit = r.stdout
    assert "/usr/bin/env" not in unit and "ExecStart='" + str(exe) + "' serve Qwen/Qwen3.5-4B" in unit
    assert exec_start(unit)[:3] == [str(exe), "serve", "Qwen/Qwen3.5-4B"] and "no vllm on PATH" not in r.stderr
    if shutil.which("systemd-analyze"):
        f = tmp_path / "vllm-test.service"
        f.write_text(unit)
        res = subprocess.run(["systemd-analyze", "verify", str(f)], capture_output=True, text=True)
        assert res.returncode == 0 and "ExecStart" not in res.stderr, res.stderr


def test_without_vllm_on_path_the_unit_says_so_and_holds_a_placeholder(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    r = invoke(*BASE, "--format", "systemd")
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    i = next(i for i, x in enumerate(lines) if x.startswith("ExecStart="))
    comment = lines[i - 1]
    assert comment.startswith("# ExecStart needs vLLM's absolute path") and "/ABSOLUTE/PATH/TO/vllm" in comment
    assert exec_start(r.stdout)[:2] == ["/ABSOLUTE/PATH/TO/vllm", "serve"] and "/usr/bin/env" not in r.stdout
    assert "--vllm-bin" in r.stderr and "no vllm on PATH" in r.stderr


def test_vllm_bin_names_the_executable_and_is_checked(tmp_path):
    unit = ok(*BASE, "--format", "systemd", "--vllm-bin", "/opt/100% venv/$HOME/bin/vllm")
    assert "ExecStart='/opt/100%% venv/$$HOME/bin/vllm' serve" in unit
    assert exec_start(unit)[0] == "/opt/100% venv/$HOME/bin/vllm"
    assert "--format systemd" in refused(*BASE, "--vllm-bin", "/opt/v/bin/vllm")
    assert "absolute path" in refused(*BASE, "--format", "systemd", "--vllm-bin", "venv/bin/vllm")


def test_plan_writes_the_same_unit(tmp_path, monkeypatch):
    exe = fake_vllm(tmp_path / "venv" / "bin")
    monkeypatch.setenv("PATH", str(exe.parent))
    out = ok("plan", "--gpu", "h100", "--model", "qwen3-8b", "--target-context", "16384", "--format", "systemd")
    assert f"ExecStart={exe} serve Qwen/Qwen3-8B" in out and "/usr/bin/env" not in out


# quoting: what a unit or a service cannot hold is refused, the rest is written so it reads back ------------------

@pytest.mark.parametrize("name", ["100%", "%n%i", "$HOME", "${X}", "a'b\"c", "`id`", "a\\nb", "x; rm -rf /"])
def test_specifiers_and_variables_in_names(name):
    unit = ok(*BASE, "--checkpoint", "/m/" + name, "--served-model-name", name, "--format", "systemd",
              "--vllm-bin", "/usr/bin/vllm")
    words = exec_start(unit)
    assert words[2] == "/m/" + name and served_name(words) == name
    desc = next(x for x in unit.splitlines() if x.startswith("Description="))[len("Description="):]
    assert desc.replace("%%", "%").startswith(f"vLLM /m/{name} (")  # specifiers escaped, '$' as it is
