"""The Python API: what `vrambudget predict`, `plan` and `explain` answer, for planners that embed the tool. No CLI
parsing, no typer, no torch: the core alone (it also runs in a browser, web/).

    >>> import vrambudget
    >>> a = vrambudget.predict(model="qwen3-8b", gpu="h100", max_model_len=32768)
    >>> a.starts, a.max_model_len_ceiling, a.available_kv_bytes

Keyword arguments are vLLM's own flag names with underscores (`gpu_memory_utilization`, `kv_cache_dtype`,
`max_num_seqs`, `enforce_eager`, `tensor_parallel_size`, `speculative_config`, ...) plus vrambudget's (`gpu`,
`gpu_memory`, `vllm_version`, `compile_cache`, `mtp`). Bad input raises `vrambudget.UserError` with the one line the
CLI prints.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .errors import UserError

__all__ = ["Prediction", "UserError", "deployment_options", "explain", "flag_names", "plan", "predict", "serve_command"]


@dataclass(frozen=True)
class Prediction:
    """One deployment's answer: the same figures as `vrambudget predict --json` (all of them in `json`)."""

    model: str
    gpu: str
    vllm: str
    starts: bool  # vLLM starts with these flags (on the boot `compile_cache` names)
    max_model_len: int  # the context it starts with (the given one, or vLLM's default / auto-fit)
    max_model_len_ceiling: int  # the longest context that starts (0: none)
    available_kv_bytes: int
    kv_cache_tokens: int
    budget_bytes: dict[str, int]  # the startup budget's terms (requested, weights, activation, graphs, ...)
    estimated_terms: tuple[str, ...]  # what is estimated rather than measured for this deployment
    refusals: tuple[str, ...]  # why vLLM refuses to start, in vLLM's words, where it does
    json: dict[str, Any] = field(repr=False)  # `predict --json`, key for key


def flag_names() -> tuple[str, ...]:
    """The keyword arguments `predict` takes (vLLM's flag names with underscores, and vrambudget's own)."""
    return tuple(sorted(_aliases()))


def _aliases() -> dict[str, str]:
    """Every option's long flag as a Python name -> the DeploymentOptions field it sets."""
    from .commands.options import OPTIONS

    out = {}
    for name, opt in OPTIONS.items():
        out[name] = name
        for flag in opt.flags:
            if flag.startswith("--"):
                out[flag[2:].replace("-", "_")] = name
    return out


def deployment_options(model: str | None = None, gpu: str | None = None, **flags: Any):
    """The CLI's DeploymentOptions for vLLM's flag names (`.build()` gives the Deployment and its coefficients);
    a name or a value no option takes is a UserError."""
    from dataclasses import fields

    from .commands.options import OPTIONS, DeploymentOptions

    aliases = _aliases()
    known = {f.name for f in fields(DeploymentOptions)}
    values: dict[str, Any] = {"model": model, "gpu": gpu}
    for key, value in flags.items():
        name = aliases.get(key)
        if name is None or name not in known:
            raise UserError(f"{key}: not a vLLM flag vrambudget models (known: {', '.join(flag_names())})")
        opt = OPTIONS[name]
        if value is not None and opt.type is str and not isinstance(value, str):
            value = str(value)  # max_model_len=32768, gpu_memory="24GiB"
        elif value is not None and opt.type is int and (isinstance(value, bool) or not isinstance(value, int)):
            raise UserError(f"{key}={value!r}: give a whole number")
        elif value is not None and opt.type is float and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise UserError(f"{key}={value!r}: give a number")
        elif opt.type is bool and not isinstance(value, bool) and value is not None:
            raise UserError(f"{key}={value!r}: give True or False")
        values[name] = value
    return DeploymentOptions(**values)


def predict(model: str | None = None, gpu: str | None = None, **vllm_flags: Any) -> Prediction:
    """The whole budget, KV plan and ceiling of one deployment: what `vrambudget predict --json` prints. Several
    workers (tensor or pipeline parallel over cards of their own budgets) answer for the worst one."""
    from .prediction import answer, predict_json

    d, c = deployment_options(model, gpu, **vllm_flags).build()
    if d.pp > 1 or len(d.gpus) > 1:
        from .parallel import plan_ranks, ranks_json, worst

        plans = plan_ranks(d, c)
        bad = worst(plans)
        p, data = bad.prediction, ranks_json(d, plans, bad)
    else:
        ans = answer(d, c)
        p, data = ans.asked, predict_json(ans)
    b = p.budget
    terms = {k: int(v) for k, v in data.items() if k.endswith("_bytes") and isinstance(v, (int, float))
             and not isinstance(v, bool) and k not in ("bytes_per_block",)}
    return Prediction(model=d.model.ref, gpu=d.gpu.name, vllm=d.version_label, starts=bool(p.starts),
                      max_model_len=int(d.max_model_len), max_model_len_ceiling=int(p.ceiling),
                      available_kv_bytes=int(b.available_kv_bytes), kv_cache_tokens=int(data.get("kv_cache_tokens") or 0),
                      budget_bytes=terms, estimated_terms=tuple(data.get("estimated_terms") or ()),
                      refusals=tuple(str(r.get("message", r)) if isinstance(r, dict) else str(r)
                                     for r in data.get("start_refusals") or ()),
                      json=data)


def serve_command(model: str | None = None, gpu: str | None = None, *, format: str = "shell",
                  margin: str | None = None, checkpoint: str | None = None, port: int = 8000,
                  kv_cache_memory: bool = False, **vllm_flags: Any) -> str:
    """The `vllm serve` command `vrambudget serve-cmd` writes (shell, systemd, compose or json): max_model_len the
    given one, else the predicted ceiling less `margin`; `kv_cache_memory`: vLLM's --kv-cache-memory in place of
    the GMU."""
    from .output import servecmd as sc

    sc.check_format(format)
    d, c = deployment_options(model, gpu, **vllm_flags).build()
    cmd, _ = sc.command_for(d, c, margin, checkpoint, port, None, kv_cache_memory)
    return sc.render(cmd, format, f"vLLM {cmd.argv[1]} (max_model_len {cmd.max_model_len}, GMU {d.gmu:.2f}; "
                     "vrambudget)", d.rules.version, port, None, None)


def plan(target_context: int, model: str | None = None, gpu: str | None = None, mtp: int = 2,
         **vllm_flags: Any) -> dict[str, Any]:
    """The fastest configuration that serves `target_context` tokens (CUDA graphs + MTP, graphs, eager + MTP,
    eager) with the GMU each needs: what `vrambudget plan --json` prints (less the command, which serve-cmd writes)."""
    from .fastest import best, plan as run_plan

    if isinstance(target_context, bool) or not isinstance(target_context, int) or target_context < 1:
        raise UserError(f"target_context={target_context!r}: give a whole number of tokens")
    opts = deployment_options(model, gpu, **vllm_flags).with_(mtp=0, max_model_len=str(target_context),
                                                               compile_cache="warm")
    d, c = opts.build()
    options = run_plan(d, c, target_context, mtp)
    chosen = best(options)
    return {"target_context": target_context, "inputs": d.inputs(),
            "options": [o.__dict__ | {"gmu": o.gmu} for o in options],
            "best": chosen.label if chosen is not None else None}


def explain(log_text: str, model: str | None = None, gpu: str | None = None) -> dict[str, Any]:
    """A vLLM startup log next to the prediction for the deployment it describes, term by term: what
    `vrambudget explain LOG --json` prints for the log's last startup (`model`: the model folder or profile where the
    log names a path this machine lacks; `gpu`: a catalog key where the log does not name its card)."""
    from .comparison import explain_log
    from .hardware.catalog import lookup

    if not isinstance(log_text, str):
        raise UserError("explain takes the log's text (read the file first)")
    return explain_log(log_text, "the log", model, lookup(gpu) if gpu else None).json
