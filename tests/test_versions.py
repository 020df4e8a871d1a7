"""Which vLLM version a prediction models (issue 11): given, installed (package metadata, never
imported) or the newest modelled; what is measured and what is not, said in every output."""

import json

from typer.testing import CliRunner

from vrambudget import vllm_rules
from vrambudget.cli import app
from vrambudget.vllm_rules import choose_version

runner = CliRunner()


def test_given_versions_say_what_is_measured_and_what_is_not():
    measured = choose_version("0.20.2")
    assert measured.measured and measured.rules.version == "0.20" and not measured.warnings
    assert "measured: vLLM 0.20.2 startups" in measured.label
    between = choose_version("0.23.1")
    assert between.rules.version == "0.20" and not between.measured
    assert "0.23.1 not measured" in between.label
    assert "between the modelled 0.20 and 0.26" in between.warnings[0] and "sliding-window layers keep 2 batches" in between.warnings[0]
    assert between.rules.default_gmu == 0.92  # config/cache.py of the 0.20.0-0.22.1 wheels; 0.19: 0.90
    assert choose_version("0.19.0").rules.default_gmu == 0.9
    measured26 = choose_version("0.26.0")
    assert measured26.measured and measured26.rules.version == "0.26" and not measured26.warnings
    later = choose_version("0.29.0")  # 0.27, 0.28 and 0.29-0.32 are ranges of their own, from their source
    assert later.rules.version == "0.29" and not later.measured and "Model Runner V2 for every model" in later.warnings[0]
    assert choose_version("0.28.0").rules.mamba_mode_default == "align" and not choose_version("0.28.0").warnings
    assert choose_version("0.27.1").rules.runner_buffers_in_budget and choose_version("0.31.0").rules.version == "0.29"
    newest = choose_version("0.33.1")
    assert newest.rules.version == "0.33" and not newest.warnings and "measured: vLLM 0.33.0 startups" in newest.label
    assert choose_version("0.33.0").measured
    future = choose_version("9.0")
    assert future.rules.version == "0.33" and "newer than the newest modelled" in future.warnings[0]


def test_default_is_the_installed_vllm_from_package_metadata(monkeypatch):
    monkeypatch.setattr(vllm_rules, "installed_vllm", lambda: "0.20.2")
    c = choose_version(None)
    assert (c.asked, c.how, c.rules.version) == ("0.20.2", "installed", "0.20") and "installed" in c.label
    monkeypatch.setattr(vllm_rules, "installed_vllm", lambda: None)
    c = choose_version(None)
    assert (c.asked, c.how) == (vllm_rules.NEWEST, "newest") and "newest modelled" in c.label


def test_installed_vllm_reads_metadata_without_importing(tmp_path, monkeypatch):
    import sys

    (tmp_path / "vllm-0.26.0.dist-info").mkdir()
    (tmp_path / "vllm-0.26.0.dist-info" / "METADATA").write_text("Name: vllm\nVersion: 0.26.0\n")
    monkeypatch.setattr(sys, "path", [str(tmp_path)])
    assert vllm_rules.installed_vllm() == "0.26.0" and "vllm" not in sys.modules
    monkeypatch.setattr(sys, "path", [str(tmp_path / "nothing")])
    assert vllm_rules.installed_vllm() is None


def test_every_output_names_the_modelled_version(monkeypatch):
    monkeypatch.setattr(vllm_rules, "installed_vllm", lambda: None)
    text = runner.invoke(app, ["predict", "--gpu", "4060ti", "--vllm-version", "0.24.0"]).output
    assert "vLLM 0.24.0 (0.20 rules, coefficients from 0.20.2 logs; 0.24.0 not measured)" in text
    assert "warning: vLLM 0.24.0 lies between the modelled 0.20 and 0.26" in text
    assert "sampler's peaks no longer add" in text  # what changed between the two ranges, named
    text = runner.invoke(app, ["predict", "--gpu", "4060ti", "--vllm-version", "0.26.0"]).output
    assert "vLLM 0.26.0 (measured: vLLM 0.26.0 startups on H100 and 2x H200" in text and "lies between" not in text
    text = runner.invoke(app, ["predict", "--gpu", "4060ti", "--vllm-version", "0.30.1"]).output
    assert "0.29 rules, coefficients from 0.26.0 logs; 0.30.1 not measured" in text
    assert "one null block kept back" in text
    out = json.loads(runner.invoke(app, ["predict", "--gpu", "4060ti", "--json"]).output)
    assert out["inputs"]["vllm_version_modelled"].startswith("vLLM 0.33 (newest modelled")
