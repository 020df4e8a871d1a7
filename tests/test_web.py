"""The web page (web/, issue 47) in a real headless browser: built once per test module by web/build.py from the npm
tarball cached in web/.cache, served by a local http.server (file:// blocks the wasm fetches), driven through its
form in Debian's chromium by playwright. It answers the README's main command with the CLI's own figures
(`predict --json` key for key, the ceilings, the available KV cache, the `vllm serve` command), a pasted config.json
as the CLI answers its folder, and a bad config with one clear message.

Skipped, with the reason, where chromium, playwright or Pyodide's npm tarball is missing here; .ci/run installs
them, builds the page and sets VRAMBUDGET_WEB_REQUIRED=1, which turns those skips into failures.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
WEB = REPO / "web"
CHROMIUM = os.environ.get("VRAMBUDGET_CHROMIUM", "/usr/bin/chromium")
REQUIRED = os.environ.get("VRAMBUDGET_WEB_REQUIRED") == "1"
TIMEOUT_MS = 180_000  # Pyodide's start is CPU-bound: generous for a CI machine running the suite on every core


def missing(reason: str) -> None:
    if REQUIRED:
        pytest.fail(f"{reason} (VRAMBUDGET_WEB_REQUIRED=1: CI must have it)")
    pytest.skip(reason)


def readme_main_command() -> list[str]:
    """The README's main command (its first `<!-- output: ... -->` block), as argv after `vrambudget`."""
    m = re.search(r"<!-- output: vrambudget (predict [^>]*?) -->", (REPO / "README.md").read_text(encoding="utf-8"))
    assert m, "README.md has no <!-- output: vrambudget predict ... --> block"
    return shlex.split(m.group(1))


def cli(argv: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", "from vrambudget.cli import main; main()", *argv],
                          capture_output=True, text=True, timeout=300)


def cli_json(argv: list[str]) -> dict:
    r = cli([*argv, "--json"])
    assert r.returncode in (0, 1), r.stderr  # 1: the answer is no
    return json.loads(r.stdout)


# The page's form controls for the CLI's flags: flag -> (control id, kind); kind "value" takes the next word.
PAGE_FLAGS = {
    "--gpu": ("gpu", "select"), "-m": ("model", "select"), "--model": ("model", "select"),
    "--gmu": ("gmu", "fill"), "--gpu-memory-utilization": ("gmu", "fill"),
    "--max-model-len": ("max_model_len", "fill"), "--kv-cache-dtype": ("kv_cache_dtype", "select"),
    "--max-num-seqs": ("max_num_seqs", "fill"), "--max-num-batched-tokens": ("max_num_batched_tokens", "fill"),
    "--tensor-parallel-size": ("tensor_parallel_size", "fill"), "-tp": ("tensor_parallel_size", "fill"),
    "--vllm-version": ("vllm_version", "select"), "--mtp": ("mtp", "mtp"),
    "--enforce-eager": ("enforce_eager", "check"), "--language-model-only": ("language_model_only", "true"),
    "--with-vision": ("language_model_only", "false"),
}


def page_settings(argv: list[str]) -> list[tuple[str, str, str]]:
    """(control id, kind, value) for each flag of a `predict` command; a flag the page lacks fails the test."""
    out, words, i = [], argv[1:], 0
    while i < len(words):
        flag = words[i]
        assert flag in PAGE_FLAGS, f"the README's main command uses {flag}, which the web page has no control for"
        cid, kind = PAGE_FLAGS[flag]
        if cid == "gpu":  # the picker lists the catalog's keys: the name as the CLI resolves it
            from vrambudget.hardware.catalog import lookup

            out.append((cid, kind, lookup(words[i + 1]).key))
            i += 2
        elif kind in ("select", "fill"):
            out.append((cid, kind, words[i + 1]))
            i += 2
        elif kind == "mtp":  # a bare --mtp is K=2, as the CLI reads it
            k = words[i + 1] if i + 1 < len(words) and words[i + 1].isdigit() else None
            out.append((cid, "select", k or "2"))
            i += 2 if k else 1
        else:
            out.append((cid, kind, ""))
            i += 1
    return out


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """web/build.py's folder, built from this checkout, served on a free local port."""
    sys.path.insert(0, str(WEB))
    try:
        import build
    finally:
        sys.path.remove(str(WEB))
    out = tmp_path_factory.mktemp("web") / "dist"
    cached = (WEB / ".cache" / f"pyodide-{build.PYODIDE_VERSION}.tgz").is_file()
    if not cached and shutil.which("npm") is None:
        missing(f"the page cannot be built: pyodide-{build.PYODIDE_VERSION}.tgz is not in web/.cache and npm is not "
                "installed (run `python web/build.py` once where npm reaches the registry)")
    try:
        build.build(out, WEB / ".cache")
    except build.BuildError as e:
        if not cached and "npm pack" in str(e):
            missing(f"the page cannot be built: {e}")
        raise

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(out)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def page(site):
    """The page loaded in headless chromium, Python ready and its first answer drawn."""
    if not Path(CHROMIUM).is_file():
        missing(f"no chromium at {CHROMIUM} (Debian: apt-get install chromium; or set VRAMBUDGET_CHROMIUM)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        missing("playwright is not installed (pip install '.[web]')")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        pg = browser.new_page()
        problems: list[str] = []
        pg.on("pageerror", lambda e: problems.append(f"page error: {e}"))
        pg.on("requestfailed", lambda r: problems.append(f"request failed: {r.url}"))
        pg.goto(site + "index.html")
        pg.wait_for_function("() => window.vrambudget && (window.vrambudget.answers > 0 || window.vrambudget.loadError)",
                             timeout=TIMEOUT_MS)
        assert not pg.evaluate("window.vrambudget.loadError"), pg.inner_text("#status")
        pg.problems = problems
        yield pg
        browser.close()


def answer_for(pg, inputs: dict) -> dict:
    """The page's answer once it is for `inputs` (predict --json's "inputs", key for key) and complete."""
    pg.wait_for_function(
        """(want) => { const s = window.vrambudget; const a = document.getElementById('answer');
             return s.last && !s.error && JSON.stringify(s.last.json.inputs) === JSON.stringify(want)
                 && a.dataset.complete === String(s.answers); }""", arg=inputs, timeout=TIMEOUT_MS)
    return pg.evaluate("window.vrambudget.last")


def set_controls(pg, settings) -> None:
    for cid, kind, value in settings:
        sel = f"#{cid}"
        if kind == "select":
            pg.select_option(sel, value)
        elif kind == "fill":
            pg.fill(sel, value)
        elif kind == "check":
            pg.check(sel)
        else:
            pg.select_option(sel, kind)


def test_page_answers_the_readme_main_command_with_the_cli_figures(page):
    argv = readme_main_command()
    want = cli_json(argv)
    newest = page.evaluate("document.getElementById('vllm_version').options[0].textContent")
    settings = page_settings(argv)
    if want["inputs"]["vllm_version"] not in newest:  # the CLI took an installed vLLM's version: ask for the same
        settings.append(("vllm_version", "select", want["inputs"]["vllm_version"]))
    if not any(cid == "model" for cid, _, _ in settings):  # the CLI's default model, by its name
        settings.append(("model", "select", want["inputs"]["model"]))
    set_controls(page, settings)
    got = answer_for(page, want["inputs"])

    assert got["json"] == want  # predict --json, key for key
    # the build made Pyodide's memory snapshot (Node.js is on the machine: npm is), and the page booted from it
    if shutil.which("node"):
        assert page.evaluate("window.vrambudget.timings.snapshot") is True
    ans = page.locator("#answer")
    assert ans.get_attribute("data-ceiling") == str(want["max_model_len_ceiling"])
    assert ans.get_attribute("data-available-kv-bytes") == str(want["available_kv_bytes"])
    assert ans.get_attribute("data-ceiling-restart") == str(want["max_model_len_ceiling_restart"])
    shown = page.inner_text("#context")
    fix = want.get("with_fix")
    if fix:  # the main command: vLLM refuses 256 sequences; the answer is the fix's ceilings
        assert ans.get_attribute("data-fix-restart") == str(fix["max_model_len_ceiling_restart"])
        assert f"{fix['max_model_len_ceiling_first_boot']:,}" in shown
        assert f"{fix['max_model_len_ceiling_restart']:,}" in shown
        assert f"--max-num-seqs {fix['max_num_seqs']}" in shown
    else:
        assert f"{want['max_model_len_ceiling_restart']:,}" in shown
    # the CLI's answer lines, word for word
    text = cli(argv).stdout
    for line in page.locator("#answer-lines li").all_inner_texts():
        assert line in text
    # the budget bar: KV cache available, in GiB as the CLI's table prints it
    kv_gib = f"{want['available_kv_bytes'] / 2**30:.2f} GiB"
    assert kv_gib in page.inner_text("#budget-table")
    # the serve command: serve-cmd's, with the same flags
    cmd = cli(["serve-cmd", *argv[1:]])
    assert cmd.returncode == 0, cmd.stderr
    assert page.inner_text("#command-text").strip() == cmd.stdout.strip()
    # the GMU sweep drew its rows: the asked GMU among them, with the figures predict gives at that GMU
    page.wait_for_function("() => document.getElementById('sweep').dataset.seq === String(window.vrambudget.answers)",
                           timeout=TIMEOUT_MS)
    assert page.locator(".sweep-row").count() >= 5
    assert page.locator(".sweep-row.chosen").count() == 1
    assert not page.problems, page.problems


def test_pasted_config_answers_as_the_cli_answers_its_folder(page, tmp_path):
    profile = json.loads((REPO / "profiles" / "models" / "qwen3-8b.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps(profile["config"], indent=1))
    want = cli_json(["predict", "-m", str(tmp_path), "--gpu", "rtx4090", "--max-model-len", "16k"])
    set_controls(page, [("gpu", "select", "rtx4090"), ("gmu", "fill", ""), ("mtp", "select", ""),
                        ("max_model_len", "fill", "16k")])
    page.fill("#config", json.dumps(profile["config"], indent=1))
    got = answer_for(page, {**want["inputs"], "model": "/tmp/model"})
    for key in ("available_kv_bytes", "max_model_len_ceiling", "max_model_len_ceiling_first_boot",
                "max_model_len_ceiling_restart", "weights_bytes", "num_blocks", "kv_cache_tokens"):
        assert got["json"][key] == want[key], key
    assert got["starts"] == want["starts_first_boot"]
    assert f"{want['max_model_len_ceiling_restart']:,}" in page.inner_text("#context")
    assert "<your-checkpoint>" in page.inner_text("#command-text")


@pytest.mark.parametrize("config, words", [
    ('{"architectures": ["FooForCausalLM"], "model_type": "foo"}', "FooForCausalLM (model_type foo) is not a family"),
    ('{"hidden_size": 4096,', "is not valid JSON"),
])
def test_bad_config_shows_one_clear_message(page, config, words):
    page.fill("#config", config)  # typing into the box picks "config.json below" as the model
    page.wait_for_function("(w) => (window.vrambudget.error || '').includes(w)", arg=words, timeout=TIMEOUT_MS)
    err = page.locator("#error")
    assert err.is_visible()
    message = err.inner_text()
    assert words in message
    assert "\n" not in message.strip() and "Traceback" not in page.inner_text("body")
    assert not page.is_visible("#answer") and not page.is_visible("#budget")


def test_the_snapshot_patch_refuses_a_pyodide_it_does_not_know(tmp_path):
    """web/build.py lets Pyodide's restoreSnapshot grow the memory first, in one exact statement; another Pyodide's
    loader is refused in one line rather than patched blind."""
    sys.path.insert(0, str(WEB))
    try:
        import build
    finally:
        sys.path.remove(str(WEB))
    old, new = build.SNAPSHOT_PATCH
    (tmp_path / "pyodide.asm.mjs").write_text("x;" + old + ";y")
    build.patch_snapshot_restore(tmp_path)
    assert (tmp_path / "pyodide.asm.mjs").read_text() == "x;" + new + ";y"
    (tmp_path / "pyodide.asm.mjs").write_text("restoreSnapshot=function(t){}")
    with pytest.raises(build.BuildError, match="restoreSnapshot is not the statement"):
        build.patch_snapshot_restore(tmp_path)
