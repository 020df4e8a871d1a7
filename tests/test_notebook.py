"""The notebook runs top to bottom in a real kernel, and what it shows equals predict's numbers."""

import json
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from vrambudget import coefficients
from vrambudget.hardware import catalog as gpus
from vrambudget.model.checkpoint import resolve_model
from vrambudget.deployment import Flags, resolve
from vrambudget.prediction import predict, table_columns
from vrambudget.vllm_rules import rules_for

from .conftest import FIXTURES

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    out = tmp_path_factory.mktemp("nb") / "out.json"
    records = FIXTURES / "probe-vllm-0.20.2-h200" / "p9b" / "records.jsonl"
    mp = pytest.MonkeyPatch()
    mp.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    nb = nbformat.read(ROOT / "notebooks" / "ceiling_tables.ipynb", as_version=4)
    # the settings are the first code cell (tagged 'parameters'): set them as a user would, run headless
    settings = next(c for c in nb.cells if c.cell_type == "code")
    assert "parameters" in settings.metadata.get("tags", []) and settings.source.startswith("# Settings")
    settings.source += f"\nVLLM = '0.20.2'\nRECORDS = [{str(records)!r}]\nOUT = {str(out)!r}\n"
    NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}}).execute()
    mp.undo()
    return nb, json.loads(out.read_text())


def test_notebook_table_equals_predict(executed):
    _, shown = executed
    d = resolve(resolve_model(shown["model"]), gpus.lookup(shown["gpu"]), rules_for(shown["vllm"]),
                Flags(kv_cache_dtype="fp8", max_num_seqs=8, enable_prefix_caching=True))
    c = coefficients.load(d.rules.version)
    cols = {col.label: col for col in table_columns(d, 2)}
    assert list(shown["table"]["columns"]) == list(cols)
    for row in shown["table"]["rows"]:
        for label, ceiling in row["ceilings"].items():
            col = cols[label]
            p = predict(d.with_(gmu=row["gmu"], enforce_eager=col.enforce_eager, spec_tokens=col.spec_tokens,
                                auto_fit=True, compile_cache="warm"), c)  # the table's ceilings: restart
            assert ceiling == (p.ceiling if p.starts else 0)
    kv = {k: v["available_kv_bytes"] for k, v in shown["budgets"].items()}
    assert kv["eager"] > kv["graphs"] and kv["eager"] > kv["eager+MTP2"]


def test_notebook_draws_its_figures_and_the_probe_points(executed):
    nb, shown = executed
    images = [o for cell in nb.cells if cell.cell_type == "code" for o in cell.get("outputs", [])
              if "image/png" in o.get("data", {})]
    assert len(images) == 2  # stacked budget bars, ceiling curves
    assert [(p["max_model_len"], p["ok"]) for p in shown["points"]] == [(96480, False), (95408, True)]
    # the curve at the probed GMU predicts the probed ceiling within one block (1072 tokens)
    row = next(r for r in shown["curves"]["rows"] if abs(r["gmu"] - 0.14) < 1e-9)
    assert abs(row["ceilings"]["eager+MTP2"] - 95408) <= 1072
