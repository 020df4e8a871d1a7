"""Several hosts (`--nodes`): each host's cards, vLLM's divisibility check, and one command per host (vLLM 0.26's
--nnodes / --node-rank / --headless, read in its entrypoints/cli/serve.py; a Ray cluster before)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from typer.testing import CliRunner

from vrambudget.cli import app

runner = CliRunner()
LLAMA70 = str(Path(__file__).parent / "fixtures" / "models" / "llama-3.3-70b-instruct")
BASE = ["-m", LLAMA70, "-tp", "4", "-pp", "2", "--max-model-len", "32k"]


def _lines(out: str) -> list[list[str]]:
    return [shlex.split(line) for line in out.splitlines() if line and not line.startswith("#")]


def test_one_card_per_host_becomes_each_workers_card():
    """Two hosts of four cards each: the first stage's four workers on the first host's H100s, the second's on the
    RTX 6000 Ada host, whose smaller budget decides; the hosts are said among the estimates."""
    r = runner.invoke(app, ["predict", *BASE, "-g", "h100,rtx6000ada", "--nodes", "2", "--vllm-version", "0.26.0",
                            "--json"])
    assert r.exit_code == 0, r.output
    j = json.loads(r.stdout)
    assert j["nodes"] == 2
    assert [x["gpu"] for x in j["ranks"]] == ["h100"] * 4 + ["rtx6000-ada"] * 4
    assert j["worst_rank"].startswith("PP1")
    assert any("2 hosts" in t for t in j["estimated_terms"])
    text = runner.invoke(app, ["predict", *BASE, "-g", "h100,rtx6000ada", "--nodes", "2"]).stdout
    assert "on 4 x NVIDIA H100 80GB HBM3 (79.18 GiB) + 4 x NVIDIA RTX 6000 Ada" in text and "over 2 hosts" in text


def test_workers_must_divide_over_the_hosts():
    r = runner.invoke(app, ["predict", *BASE, "-g", "h100", "--nodes", "3"])
    assert r.exit_code == 2 and "8 workers (TP x PP x DP) to divide evenly" in r.output


def test_data_parallel_over_hosts_of_different_cards_is_refused():
    r = runner.invoke(app, ["predict", "-m", "qwen3-8b", "-dp", "2", "-g", "h100,rtx4090", "--nodes", "2"])
    assert r.exit_code == 2 and "plan each host's engine alone" in r.output


def test_serve_cmd_writes_one_vllm_serve_per_host_on_026():
    r = runner.invoke(app, ["serve-cmd", *BASE, "-g", "h100", "--nodes", "2", "--master-addr", "10.0.0.1",
                            "--vllm-version", "0.26.0"])
    assert r.exit_code == 0, r.output
    head, other = _lines(r.stdout)
    assert head[:2] == other[:2] == ["vllm", "serve"]
    for argv, rank in ((head, "0"), (other, "1")):
        assert argv[argv.index("--nnodes") + 1] == "2" and argv[argv.index("--node-rank") + 1] == rank
        assert argv[argv.index("--master-addr") + 1] == "10.0.0.1"
        assert argv[argv.index("--tensor-parallel-size") + 1] == "4"
    assert "--headless" in other and "--headless" not in head
    j = json.loads(runner.invoke(app, ["serve-cmd", *BASE, "-g", "h100", "--nodes", "2", "--master-addr",
                                       "10.0.0.1", "--vllm-version", "0.26.0", "--format", "json"]).stdout)
    assert [h["host"] for h in j["hosts"]] == [0, 1] and j["hosts"][1]["argv"][-1] == "--headless"


def test_serve_cmd_before_026_is_a_ray_cluster():
    r = runner.invoke(app, ["serve-cmd", *BASE, "-g", "h100", "--nodes", "2", "--master-addr", "head.lan",
                            "--vllm-version", "0.20.2"])
    assert r.exit_code == 0, r.output
    steps = _lines(r.stdout)
    assert steps[0] == ["ray", "start", "--head", "--port", "6379"]
    assert steps[1] == ["ray", "start", "--address", "head.lan:6379"]
    assert steps[2][:2] == ["vllm", "serve"] and steps[2][-2:] == ["--distributed-executor-backend", "ray"]


def test_serve_cmd_several_hosts_refusals():
    for extra, says in ((["--nodes", "2"], "give --master-addr"),
                        (["--nodes", "2", "--master-addr", "a b"], "a host name or IP address"),
                        (["--nodes", "2", "--master-addr", "h", "--format", "systemd"], "one unit per host")):
        r = runner.invoke(app, ["serve-cmd", *BASE, "-g", "h100", *extra])
        assert r.exit_code == 2 and says in r.output, (extra, r.output)
