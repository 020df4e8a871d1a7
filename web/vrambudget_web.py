"""The web page's side of Python (runs in Pyodide; plain CPython runs it too, tests/test_web.py does).

Everything here calls vrambudget's own core: `vrambudget.predict` for the figures (`predict --json`'s object, key for
key), `vrambudget.output.servecmd` for the `vllm serve` command as `serve-cmd` builds it, and the CLI's own text
renderer for the full report. The page talks to it in JSON strings (no Python objects cross into JavaScript).
A UserError comes back as {"error": its one line}; anything else as {"error": ..., "bug": true}, never a traceback.
"""

from __future__ import annotations

import json
import traceback
from typing import Any

import vrambudget
from vrambudget.api import deployment_options
from vrambudget.commands.common import one_line
from vrambudget.errors import UserError

# The page's fields, by DeploymentOptions' names (vrambudget.predict takes them as keyword arguments too).
FLAGS = ("gmu", "max_model_len", "kv_cache_dtype", "max_num_seqs", "max_num_batched_tokens", "enforce_eager", "mtp",
         "tensor_parallel_size", "language_model_only", "vllm_version")
LOCAL_MODEL = "/tmp/model"  # the page writes a pasted or dropped config.json here
GMU_SWEEP = (0.80, 0.85, 0.90, 0.92, 0.94, 0.95, 0.96, 0.97, 0.98)


def _one_line(message: str) -> str:
    return one_line(str(message))[:1000]


def _guard(fn, *args: Any) -> str:
    """fn's answer as JSON, or {"error": one line}: a UserError's own text, anything else named as a bug."""
    try:
        return json.dumps(fn(*args))
    except UserError as e:
        return json.dumps({"error": _one_line(str(e))})
    except Exception as e:  # a bug of ours, not the input's: one line on the page, the traceback in the console
        traceback.print_exc()
        return json.dumps({"error": f"vrambudget failed ({type(e).__name__}: {_one_line(str(e))[:300]}); this is a "
                                    "bug, not your input: please report it with the config and flags",
                           "bug": True})


def _params(req: dict[str, Any]) -> tuple[str | None, str | None, dict[str, Any]]:
    flags = {k: req[k] for k in FLAGS if req.get(k) not in (None, "")}
    return req.get("model") or None, req.get("gpu") or None, flags


def catalog() -> str:
    """GPUs, bundled models and vLLM versions for the pickers, from the bundled profiles."""

    def go() -> dict[str, Any]:
        from vrambudget.hardware.catalog import catalog as gpus
        from vrambudget.model.checkpoint import DEFAULT_MODEL, bundled_models
        from vrambudget.vllm_rules import NEWEST, RULES, _key

        return {"gpus": [{"key": g.key, "name": g.name, "gib": round(g.total_gib, 2)} for g in gpus().values()],
                "models": [{"name": n, "description": m.get("description", ""), "hf_id": m.get("hf_id")}
                           for n, m in bundled_models().items()],
                "default_model": DEFAULT_MODEL, "vllm_versions": sorted(RULES, key=_key), "newest": NEWEST,
                "version": vrambudget.__version__}

    return _guard(go)


def predict(req_json: str) -> str:
    """One deployment: vrambudget.predict's figures (`json` is `predict --json`'s object) and its answer lines."""

    def go() -> dict[str, Any]:
        model, gpu, flags = _params(json.loads(req_json))
        p = vrambudget.predict(model=model, gpu=gpu, **flags)
        return {"model": p.model, "gpu": p.gpu, "vllm": p.vllm, "starts": p.starts, "max_model_len": p.max_model_len,
                "max_model_len_ceiling": p.max_model_len_ceiling, "available_kv_bytes": p.available_kv_bytes,
                "kv_cache_tokens": p.kv_cache_tokens, "budget_bytes": p.budget_bytes,
                "estimated_terms": list(p.estimated_terms), "refusals": list(p.refusals), "json": p.json}

    return _guard(go)


def sweep(req_json: str) -> str:
    """The ceiling (first boot and restart; with the start check's fix where one refuses) at a few GMUs: one
    vrambudget.predict per GMU."""

    def go() -> dict[str, Any]:
        req = json.loads(req_json)
        model, gpu, flags = _params(req)
        gmus = sorted(set(GMU_SWEEP) | ({float(flags["gmu"])} if flags.get("gmu") else set()))
        rows = []
        for g in gmus:
            try:
                j = vrambudget.predict(model=model, gpu=gpu, **{**flags, "gmu": g}).json
            except UserError as e:
                rows.append({"gmu": g, "error": _one_line(str(e))})
                continue
            fix = j.get("with_fix") or {}
            rows.append({"gmu": g, "first_boot": j.get("max_model_len_ceiling_first_boot", j["max_model_len_ceiling"]),
                         "restart": j.get("max_model_len_ceiling_restart", j["max_model_len_ceiling"]),
                         "refused": bool(j.get("start_refusals")),
                         "fix_first_boot": fix.get("max_model_len_ceiling_first_boot"),
                         "fix_restart": fix.get("max_model_len_ceiling_restart"),
                         "fix_max_num_seqs": fix.get("max_num_seqs"), "fix_gmu": fix.get("gpu_memory_utilization")})
        return {"rows": rows}

    return _guard(go)


def _deployment(req: dict[str, Any]):
    model, gpu, flags = _params(req)
    return deployment_options(model, gpu, **flags).build()


def serve_command(req_json: str) -> str:
    """The `vllm serve` command as `vrambudget serve-cmd` writes it (shell; max_model_len: the given one, else the
    predicted ceiling), with its notes and warnings."""

    def go() -> dict[str, Any]:
        from vrambudget.output import servecmd as sc

        req = json.loads(req_json)
        d, c = _deployment(req)
        checkpoint = (req.get("checkpoint") or "").strip() or None
        notes = []
        if checkpoint is None and d.model.origin == "local":  # the page's /tmp/model means nothing on your machine
            checkpoint = "<your-checkpoint>"
            notes.append("<your-checkpoint> stands for the checkpoint whose config.json you gave: replace it with "
                         "its folder or Hugging Face id")
        cmd, more = sc.command_for(d, c, checkpoint=checkpoint)
        notes += more
        return {"command": sc.render(cmd, "shell", "", d.rules.version, 8000).strip(), "notes": notes,
                "warnings": list(cmd.warnings)}

    return _guard(go)


def report(req_json: str) -> str:
    """The CLI's own text (`vrambudget predict` without --json): the answer lines, the budget, the KV plan."""

    def go() -> dict[str, Any]:
        from vrambudget.output.render import answer_lines, prediction_text, subject_line
        from vrambudget.prediction import answer

        req = json.loads(req_json)
        d, c = _deployment(req)
        if d.pp > 1 or len(d.gpus) > 1:
            return {"text": "", "answer_lines": []}
        a = answer(d, c)
        p = a.asked
        defaulted = tuple(k for k in ("model", "gpu") if not req.get(k))
        return {"text": subject_line(d, defaulted) + "\n" + prediction_text(p, a), "answer_lines": answer_lines(a)}

    return _guard(go)
