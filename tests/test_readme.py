"""The README's command blocks are what the commands print today (docs/readme.py regenerates them)."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _readme_tool():
    spec = importlib.util.spec_from_file_location("readme_tool", ROOT / "docs" / "readme.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_every_command_block_is_what_the_command_prints_now():
    tool = _readme_tool()
    text = (ROOT / "README.md").read_text()
    assert len(tool.MARKER.findall(text)) >= 8  # the main command, plan, table, serve-cmd, explain, models, ...
    for path in tool.FILES:
        assert tool.drifted(path.read_text()) == [], f"run `python docs/readme.py` to regenerate {path.name}'s blocks"


def test_the_set_up_is_two_commands_and_the_main_command():
    text = (ROOT / "README.md").read_text()
    setup = text.split("## Set up", 1)[1].split("## ", 1)[0]
    blocks = [b.split("\n", 1)[1] for b in setup.split("```bash")[1:]]
    commands = [line.split("#")[0].strip() for b in blocks for line in b.split("```")[0].splitlines() if line.strip()]
    assert commands == ["python -m venv .venv && . .venv/bin/activate && pip install '.[test]'",
                        "python -m pytest -q -n auto", "vrambudget predict --gpu 4060ti --mtp --gmu 0.95"]
    ci = (ROOT / ".ci" / "run").read_text()
    assert "pip install -q '.[test]'" in ci and "\npython -m pytest -q -n auto\n" in ci  # CI runs the README's commands


def test_the_first_screen_holds_set_up_the_main_command_and_what_is_supported():
    first_screen = "\n".join((ROOT / "README.md").read_text().splitlines()[:45])
    assert "## Set up" in first_screen and "vrambudget predict --gpu 4060ti --mtp --gmu 0.95" in first_screen
    assert "## What it supports" in first_screen and "not (refused in one line" in first_screen


def test_a_drifted_block_is_named(tmp_path):
    tool = _readme_tool()
    stale = "<!-- run: vrambudget gpus -->\n```\n$ vrambudget gpus\nan old catalog\n```\n"
    assert tool.drifted(stale) == ["vrambudget gpus"]
    assert tool.drifted(tool.render(stale)) == []
