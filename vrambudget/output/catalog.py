"""`gpus` and `models`: the bundled GPU catalog and model profiles, as JSON for scripts and tables for people."""

from __future__ import annotations

from typing import Any

from tabulate import tabulate

from ..hardware.catalog import GPU, Basis
from ..hardware.facts import attention_backend, cuda_context
from ..vllm_rules import NEWEST


def _basis(g: GPU) -> str:
    """The listing's words for where a card's total comes from: its basis, PyTorch's figure so named, else the
    source's own head."""
    if g.basis is Basis.MEASURED:
        return "measured"
    return "PyTorch reports" if g.source.startswith("PyTorch") else g.source.split(":")[0]


def gpus_json(cat: dict[str, GPU]) -> dict[str, Any]:
    return {k: {"name": v.name, "total_bytes": v.total_bytes, "compute_capability": v.compute_capability,
                "source": v.source, "basis": v.basis.value, "sms": v.sms, "architecture": v.architecture,
                "cuda_context_bytes": cuda_context(v).value, "cuda_context_measured": cuda_context(v).measured,
                "cuda_context_source": cuda_context(v).source,
                "attention_backend_fp8_kv": attention_backend(v, "fp8", version=NEWEST).label,
                "attention_backend_bf16_kv": attention_backend(v, "bf16", version=NEWEST).label} for k, v in cat.items()}


def gpus_text(cat: dict[str, GPU]) -> str:
    rows = [[k, v.name, f"{v.total_gib:.2f}", _basis(v), v.compute_capability, v.sms, v.architecture,
             f"{cuda_context(v).value / 2**30:.2f}" + ("" if cuda_context(v).measured else " (est.)"),
             f"{attention_backend(v, 'bf16', version=NEWEST).label} / {attention_backend(v, 'fp8', version=NEWEST).label}"] for k, v in cat.items()]
    return tabulate(rows, headers=["--gpu", "name", "GiB", "total from", "cc", "SMs", "arch", "context GiB",
                                   "attention bf16 / fp8 KV"], tablefmt="simple", disable_numparse=True)


def _checked_mark(checked: str) -> str:
    if "config equal" in checked:
        return "yes"
    return "bytes" if "checkpoint bytes match" in checked else "NO"


def models_table() -> tuple[dict[str, Any], str]:
    """The bundled model profiles (and DFlash drafters): (JSON, text)."""
    from ..families import arch_from_config
    from ..model.arch import SLIDING
    from ..model.checkpoint import bundled_models
    from ..model.drafter import bundled_drafters, load_drafter
    from ..model.weights import parameter_count, weights_from_config
    from ..profiles import read_json

    rows, out = [], {}
    for name, m in bundled_models().items():
        a = arch_from_config(m["config"], name)
        w = weights_from_config(a, with_vision=False)
        n_sw = a.layer_types.count("sliding_attention")
        layers = (f"{a.num_gdn} GDN + {a.num_full_attention} attn" if a.is_hybrid else
                  f"{n_sw} sliding + {a.num_full_attention} attn" if n_sw else f"{a.num_layers} attn")
        out[name] = {"hf_id": m["hf_id"], "description": m["description"], "params": parameter_count(a),
                     "weights_bytes": w.model, "mtp_weights_bytes": w.mtp, "layers": layers,
                     "max_position_embeddings": a.max_position_embeddings, "source": m["source"],
                     "checked": m.get("checked", "not checked against the official config")}
        rows.append([name, f"{parameter_count(a) / 1e9:.2f}B", f"{w.model / 2**30:.2f}",
                     f"{w.mtp / 2**30:.2f}" if a.mtp_layers else "-", layers, f"{a.max_position_embeddings:,}",
                     m["hf_id"] or "(layout of community AWQ)", _checked_mark(m.get("checked", ""))])
    text = [tabulate(rows, headers=["--model", "params", "weights GiB", "MTP GiB", "layers", "max len",
                                    "Hugging Face", "config checked"], tablefmt="simple", disable_numparse=True),
            "config checked: yes = field by field against the official config.json; bytes = shapes (and a "
            "quantized layout) whose bytes equal the checkpoint's (`models --json`: 'checked' says against what, and "
            "what is not verified)"]
    drafters = []
    for name, path in bundled_drafters().items():
        dr, prof = load_drafter(name), read_json(path)
        drafters.append([name, prof["hf_id"], f"{dr.num_layers} ({dr.layer_kinds.count(SLIDING)} sliding)",
                         f"{dr.num_kv_heads} x {dr.head_dim}", prof["checked"]])
    if drafters:
        text.append("\nDFlash drafters (--speculative-config '{\"method\":\"dflash\",\"model\":NAME,...}'):")
        text.append(tabulate(drafters, headers=["model", "Hugging Face", "layers", "KV heads x dim", "checked"],
                             tablefmt="simple", disable_numparse=True))
    return out, "\n".join(text)


def families_table() -> tuple[dict[str, Any], str]:
    """The model families (vrambudget/families): (JSON, text)."""
    from ..families import families

    fams = [{"name": f.name, "architectures": list(f.architectures), "model_types": list(f.model_types),
             "evidence": f.evidence} for f in families()]
    rows = [[f["name"], ", ".join(f["architectures"]), f["evidence"]] for f in fams]
    text = [tabulate(rows, headers=["family", "config.json architectures", "checked against"], tablefmt="simple",
                     disable_numparse=True, maxcolwidths=[34, 44, 70]),
            "Any other architecture is refused in one line (its layers' memory is not modelled), never planned as "
            "dense attention. Refused inside these families: DeepSeek V3.2 / GLM-5 sparse attention off Hopper (and "
            "under CUDA graphs off 132-SM Hopper cards: pass --enforce-eager), Nemotron-3 Super's latent MoE, Gemma 4 E2B/E4B, "
            "Gemma 4's audio tower, the vision towers on vLLM before 0.33 (traced in 0.33's source; pass "
            "--language-model-only)."]
    return {"families": fams}, "\n".join(text)
