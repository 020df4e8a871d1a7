"""Any other Hugging Face config (issue 10, item 4): planned with a statement of what was assumed, or
refused in one line that names what is not modelled; never a silent guess. The configs here are minimal
synthetic inputs (only the keys under test), not copies of real checkpoints."""

import json

from typer.testing import CliRunner

from vrambudget.cli import app

runner = CliRunner()
BASE = {"num_hidden_layers": 4, "hidden_size": 1024, "num_attention_heads": 8, "num_key_value_heads": 2,
        "intermediate_size": 2048, "vocab_size": 32000, "max_position_embeddings": 8192, "torch_dtype": "bfloat16"}


def _model(tmp_path, **cfg):
    (tmp_path / "config.json").write_text(json.dumps({**BASE, **cfg}))
    return str(tmp_path)


def test_a_config_with_unmodelled_attention_is_refused_in_one_line(tmp_path):
    # Gemma 4's E2B/E4B: KV shared across layers and per-layer input embeddings (the 31B / 26B-A4B are planned)
    m = _model(tmp_path, model_type="gemma4_text", num_kv_shared_layers=20, hidden_size_per_layer_input=256)
    r = runner.invoke(app, ["predict", "-m", m, "--gpu", "rtx3090"])
    assert r.exit_code != 0 and "Traceback" not in r.output
    lines = [x for x in r.output.splitlines() if x.strip()]
    assert len(lines) == 1 and "KV cache shared across layers" in lines[0] and "per-layer input embeddings" in lines[0]


def test_a_model_type_no_family_claims_is_refused_not_planned(tmp_path):
    """Issue 35: the families are an allow-list (vrambudget/families); Phi-3 is one (vLLM's Phi3ForCausalLM is
    Llama's: the lab's Phi-4 startup), an unknown type is refused in one line, never planned as dense attention."""
    m = _model(tmp_path, model_type="phi3", architectures=["Phi3ForCausalLM"])
    out = json.loads(runner.invoke(app, ["predict", "-m", m, "--gpu", "rtx3090", "--json"]).output)
    assert not [t for t in out["estimated_terms"] if "model type" in t]
    other = _model(tmp_path, model_type="olmo2", architectures=["Olmo2ForCausalLM"])
    r = runner.invoke(app, ["predict", "-m", other, "--gpu", "rtx3090"])
    assert r.exit_code == 2 and "Olmo2ForCausalLM" in r.output and "not a family vrambudget plans" in r.output
