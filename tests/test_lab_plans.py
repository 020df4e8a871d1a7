"""The lab as data: every lab fixture was made by exactly one step of one plan, and every plan is runnable as
written (its steps name known kinds, its startup configs only keys startup.py reads, its model sources exist)."""

import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LAB = ROOT / "benchmarks" / "lab"
PLANS = sorted((LAB / "plans").glob("*.json"))
KINDS = ("startup", "probe", "serve", "snapshot", "shell", "ctx")


def startup_keys() -> set[str]:
    """The config keys benchmarks/lab/startup.py reads (cfg["key"] and cfg.get("key"))."""
    src = (LAB / "startup.py").read_text()
    return set(re.findall(r'cfg(?:\.get\(|\[)"(\w+)"', src))


def test_every_plan_is_complete_and_its_steps_runnable():
    keys = startup_keys()
    assert PLANS
    for path in PLANS:
        p = json.loads(path.read_text())
        assert {"about", "date", "issue", "device", "vllm", "bundle", "steps"} <= set(p), path.name
        tags = [s["tag"] for s in p["steps"]]
        assert len(tags) == len(set(tags)), path.name
        for s in p["steps"]:
            assert sum(k in s for k in KINDS) == 1, (path.name, s["tag"])
            if "startup" in s:
                assert set(s["startup"]) <= keys, (path.name, s["tag"], set(s["startup"]) - keys)
                assert "gmu" in s["startup"] and "model" in s["startup"]
            if "snapshot" in s:
                assert set(s["snapshot"]) - {"phase"} <= keys and "gmu" in s["snapshot"], (path.name, s["tag"])
        for dest, m in p.get("models", {}).items():
            src = (ROOT / m["fixture"] / "config.json" if "fixture" in m else
                   ROOT / "profiles" / "models" / f"{m['profile']}.json" if "profile" in m else
                   ROOT / "profiles" / "drafters" / f"{m['drafter']}.json")
            assert src.is_file(), (path.name, dest)


def test_every_lab_fixture_names_exactly_one_plan_step():
    claims = [(path.name, s["tag"], s["fixture"]) for path in PLANS for s in json.loads(path.read_text())["steps"]
              if s.get("fixture")]
    files = [f for d in (ROOT / "tests" / "fixtures").glob("*") if d.name.startswith(("lab-", "probe-"))
             for f in d.rglob("*") if f.is_file() and f.name != "README.md"]
    assert len(files) > 100
    for f in files:
        rel = f.relative_to(ROOT).as_posix()
        owners = [(plan, tag) for plan, tag, fx in claims if rel == fx or (fx.endswith("/") and rel.startswith(fx))]
        assert len(owners) == 1, (rel, owners)
    pending = {path.name for path in PLANS if json.loads(path.read_text()).get("pending")}
    for plan, tag, fx in claims:  # and no step claims a fixture that is not there (but a plan not yet run)
        assert plan in pending or (ROOT / fx).exists(), (plan, tag, fx)
    for plan in pending:  # a plan committed before its run makes none of its fixtures yet
        assert not any((ROOT / fx).exists() for p, _, fx in claims if p == plan), plan


def test_the_runner_lists_a_plan_without_a_gpu():
    out = subprocess.run([sys.executable, str(LAB / "run.py"), "h100-0.20.2-runtime", "--list"], capture_output=True,
                         text=True, check=True).stdout
    assert "p5" in out and "tests/fixtures/lab-vllm-0.20.2-h100/p5/" in out


def _one_line_refusal(cmd: list[str], env: dict | None = None) -> str:
    import os

    r = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **(env or {})}, timeout=60)
    assert r.returncode == 2, (cmd, r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr + r.stdout and len(r.stderr.strip().splitlines()) == 1, r.stderr
    return r.stderr


def test_bad_plans_and_arguments_get_one_line(tmp_path):
    run = [sys.executable, str(LAB / "run.py")]
    assert "usage" in _one_line_refusal(run)
    assert "no plan" in _one_line_refusal(run + ["no-such-plan"])
    bad = tmp_path / "bad.json"
    for text, says in (("{not json", "is not JSON"), ("[]", "JSON object"), ('{"bundle": null}', "'steps'"),
                       ('{"bundle": null, "steps": [{"tag": "a"}]}', "exactly one of"),
                       ('{"bundle": null, "steps": [{"tag": "a", "shell": "true"}, {"tag": "a", "shell": "true"}]}',
                        "used twice"),
                       ('{"bundle": null, "steps": [{"tag": "a b", "shell": "true"}]}', "tag must be"),
                       ('{"bundle": null, "steps": [{"tag": "a", "shell": "true", "gpus": "0"}]}', "'gpus'"),
                       ('{"bundle": null, "steps": [{"tag": "a", "shell": "true", "after": ["b"]}]}', "not an earlier"),
                       ('{"bundle": {"dir": ""}, "steps": [{"tag": "a", "shell": "true"}]}', "'bundle'"),
                       ('{"bundle": null, "steps": [{"tag": "a", "shell": "true", "timeout": -1}]}', "'timeout'")):
        bad.write_text(text)
        assert says in _one_line_refusal(run + [str(bad)]), text
    assert "--wait takes seconds" in _one_line_refusal(run + ["h200x4-0.33.0-lab", "--wait", "soon"])
    assert "--lane takes" in _one_line_refusal(run + ["h200x4-0.33.0-lab", "--detach", "--lane", "a/b", "smoke"])
    assert "has no step" in _one_line_refusal(run + ["h200x4-0.33.0-lab", "nope"])


def test_the_033_bundle_script_refuses_bad_arguments_before_downloading(tmp_path):
    script = ["bash", str(LAB / "build-bundle-0.33.sh")]
    assert "usage" in _one_line_refusal(script)
    a_file = tmp_path / "f"
    a_file.write_text("")
    assert "not a folder" in _one_line_refusal(script + [str(a_file)])
    for bad in ("0", "abc", "99", "1e3"):
        assert "PART_MB" in _one_line_refusal(script + [str(tmp_path / "out")], {"PART_MB": bad})
    assert not (tmp_path / "out").exists()  # nothing made before the arguments were checked
