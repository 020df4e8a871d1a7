"""serve-cmd writes files other programs execute (issue 36): every value survives each format's own reading
rules (shell: shlex; systemd: systemd.syntax(7) quoting, C escapes, % specifiers and $ variables; compose: YAML,
then compose's $ interpolation), and what no format can hold (a newline) is refused in one line. A local path is
absolute in every format (kept as given where it already is) and mounted into the compose container; a served
name beginning with '-' is joined to its option with '=' (test_servecmd_hostile.py: what vLLM's parser reads)."""

import re
import shlex

import pytest
import yaml
from hypothesis import given, settings, strategies as st
from typer.testing import CliRunner

from vrambudget.cli import app

BASE = ["serve-cmd", "--gpu", "rtx4090", "--model", "qwen3-8b"]


def systemd_words(line: str) -> list[str]:
    """ExecStart's words as systemd reads them: whitespace-split outside quotes, C escapes inside double quotes,
    then '%%' -> '%' (specifiers) and '$$' -> '$' (variables); a lone % or $ would be expanded: an error here."""
    words, i, n = [], 0, len(line)
    while i < n:
        if line[i].isspace():
            i += 1
            continue
        w = ""
        if line[i] in "\"'":
            quote = line[i]
            i += 1
            while line[i] != quote:
                if line[i] == "\\":
                    i += 1
                    w += {"n": "\n", "t": "\t", "\\": "\\", '"': '"', "'": "'"}[line[i]]
                else:
                    w += line[i]
                i += 1
            i += 1
        else:
            while i < n and not line[i].isspace():
                assert line[i] not in "\"'\\", f"unquoted special in {line!r}"
                w += line[i]
                i += 1
        assert not re.search(r"(?<!%)%(?!%)", w.replace("%%", "")), f"unescaped specifier in {w!r}"
        assert "$" not in w.replace("$$", ""), f"unescaped variable in {w!r}"
        words.append(w.replace("%%", "%").replace("$$", "$"))
    return words


def _compose_value(x: str) -> str:
    assert "$" not in x.replace("$$", ""), f"compose would interpolate {x!r}"
    return x.replace("$$", "$")


def compose_command(text: str) -> list[str]:
    return [_compose_value(x) for x in yaml.safe_load(text)["services"]["vllm"]["command"]]


def compose_mounts(text: str) -> dict[str, str]:
    """The bind mounts of the service: path inside the container -> host path (compose's $$ undone)."""
    vols = yaml.safe_load(text)["services"]["vllm"]["volumes"]
    return {_compose_value(v["target"]): _compose_value(v["source"]) for v in vols if isinstance(v, dict)}


def served_name(words: list[str]) -> str:
    """--served-model-name's value, given as the next word or joined with '='."""
    for i, w in enumerate(words):
        if w == "--served-model-name":
            return words[i + 1]
        if w.startswith("--served-model-name="):
            return w.split("=", 1)[1]
    raise AssertionError(f"no --served-model-name in {words}")


def render(fmt: str, checkpoint: str, served: str) -> str:
    r = CliRunner().invoke(app, [*BASE, "--format", fmt, f"--checkpoint={checkpoint}", f"--served-model-name={served}",
                                 *(["--vllm-bin", "/opt/vllm env/bin/vllm"] if fmt == "systemd" else [])])
    assert r.exit_code == 0, r.output
    return r.stdout


NASTY = ["/models/a b/c", "/m/$HOME/x", "/m/100%/x", "/m/it's", '/m/"q"', "/m/back\\slash", "/m/${X}%n$$",
         "/m/`id`;rm -rf /", "/m/ünïcødé"]


def check_reads_back(path: str, name: str) -> None:
    """A checkpoint folder (absolute) and a served name come back exactly from every format."""
    sh = shlex.split(render("shell", path, name))
    assert sh[:3] == ["vllm", "serve", path] and served_name(sh) == name
    unit = render("systemd", path, name)
    exec_line = next(x for x in unit.splitlines() if x.startswith("ExecStart="))
    words = systemd_words(exec_line[len("ExecStart="):])
    assert words[:3] == ["/opt/vllm env/bin/vllm", "serve", path] and served_name(words) == name
    desc = next(x for x in unit.splitlines() if x.startswith("Description="))
    assert "%" not in desc.replace("%%", "") and path in desc.replace("%%", "%")  # Description expands no $
    text = render("compose", path, name)
    cmd = compose_command(text)
    assert compose_mounts(text)[cmd[0]] == path and served_name(cmd) == name  # mounted, named inside the container


@pytest.mark.parametrize("value", NASTY)
def test_every_format_reads_back_exactly_what_was_given(value):
    check_reads_back(value, value)


@given(st.text(st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp")), min_size=1, max_size=40))
@settings(max_examples=30, deadline=None)
def test_generated_values_read_back_in_every_format(value):
    if not value.isprintable() or not value.strip():  # refused in one line (test below)
        return
    check_reads_back("/m/" + value, value)  # a served name beginning with '-' too: joined with '='


@pytest.mark.parametrize("args, words", [
    (["--checkpoint", "/m/a\nExecStartPre=/bin/sh -c evil"], ("--checkpoint", "control characters")),
    (["--served-model-name", "x\ry"], ("--served-model-name", "control characters")),
    (["--served-model-name", " "], ("--served-model-name", "empty")),
    (["--checkpoint", "/m/a\u2028b"], ("--checkpoint", "control characters")),
    (["--format", "systemd", "--vllm-bin", "/opt/v\nExecStartPre=/bin/evil"], ("--vllm-bin", "control characters")),
    (["--format", "systemd", "--user", "root\nExecStartPre=/bin/evil"], ("--user",)),
    (["--margin=-5%"], ("--margin", "from 0 to 100")),
    (["--margin", "inf%"], ("--margin",)),
    (["--margin", "nan%"], ("--margin",)),
    (["--margin=-4096"], ("--margin",)),
    (["--port", "99999"], ("--port", "1 to 65535")),
    (["--port", "0"], ("--port",)),
])
def test_what_no_format_can_hold_is_refused_in_one_line(args, words):
    r = CliRunner().invoke(app, [*BASE, *args])
    assert r.exit_code == 2, r.output
    assert r.stderr.startswith("error: ") and r.stderr.count("\n") == 1 and r.stdout == ""
    assert all(w in r.stderr for w in words), r.stderr
