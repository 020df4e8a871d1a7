"""A vLLM log next to the prediction for the same inputs: recover the deployment a log describes,
then compare term by term (used by `vrambudget explain`, the accuracy benchmark and `fit`)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from . import coefficients as coeffs
from .model.checkpoint import bundled_models, resolve_model
from .model.lora import LoraSlots
from .coefficients import Coefficients
from .deployment import Deployment, Flags, resolve
from .errors import UserError
from .hardware.catalog import GPU, catalog, from_memory
from .hardware.facts import under_wsl
from .profiles import read_text
from .logparse import LogFacts, flags_from_args, parse_log
from .prediction import Prediction, predict
from .units import GiB
from .vllm_rules import rules_for


def model_ref_from_log(facts: LogFacts, override: str | None = None) -> str:
    """--model override, else the log's model if it names a bundled profile or an existing path."""
    if override:
        return override
    ref = str(facts.args.get("model") or facts.args.get("model_tag") or "")
    if not ref:
        raise UserError("the log does not state its model; pass --model")
    if Path(ref).exists():
        return ref
    base = ref.rstrip("/").split("/")[-1].lower()
    if base in bundled_models():
        return base
    return ref


def gpu_from_log(facts: LogFacts, override: GPU | None = None) -> GPU:
    """The catalog GPU whose CUDA total matches the log's (to 0.01 GiB), else a custom one. A GPU named by the caller
    keeps its chip facts but takes the total the log states where they differ (that machine's own reading), or, under
    WSL 2 where the log states none, the whole memory CUDA reports there."""
    logged = facts.total_gib

    def matches(g: GPU) -> bool:  # the log rounds to 0.01 GiB
        return abs(g.total_gib - logged) < 0.006

    if override:
        if logged is None and facts.wsl:  # CUDA's total under WSL 2 is the whole memory (gpu_facts.json wsl_total)
            return under_wsl(override)
        if logged is None or matches(override):
            return override
        return replace(override, total_bytes=int(logged * GiB),
                       source=f"measured: the log's own total ({logged:.2f} GiB; the catalog's "
                              f"{override.name}: {override.total_gib:.2f})")
    if logged is None:
        raise UserError("the log does not state the GPU's total memory; pass --gpu")
    exact = next((g for g in catalog().values() if matches(g)), None)
    if exact:
        return exact
    near = [g for g in catalog().values() if abs(g.total_gib - logged) < 0.03]
    if len(near) == 1:  # one card within 0.03 GiB (another driver's total): its chip, with the log's total
        return replace(near[0], total_bytes=int(logged * GiB),
                       source=f"measured: the log's own total ({logged:.2f} GiB), on the {near[0].name}'s chip (the "
                              f"catalog's: {near[0].total_gib:.2f}; the only card within 0.03 GiB)")
    return from_memory(int(logged * GiB))


# an eager boot whose profiling took this long compiled Triton kernels inside it (0.26.0 logs: 70-165 s on a
# fresh host, <= 15 s after); graph-mode boots say cold or warm themselves
FRESH_PROFILING_SECONDS = 60.0


def deployment_from_log(facts: LogFacts, model: str | None = None, gpu: GPU | None = None,
                        drafter: str | None = None, flags_given: dict | None = None) -> Deployment:
    """The deployment a log states; `model` / `drafter` name the checkpoint and the DFlash drafter where the
    log's paths are not on this machine; `flags_given` (Flags fields) add what the log lacks or replace what it
    states. A max_model_len above the config's maximum is taken as the log states it: vLLM started with it."""
    flags = Flags(**{**flags_from_args(facts.args), **(flags_given or {}), "allow_long_max_model_len": True})
    if drafter:
        flags = replace(flags, draft_model=drafter)
    slow = (facts.profiling_seconds or 0) > FRESH_PROFILING_SECONDS
    cache = facts.compile
    if cache == "warm" and slow:
        # a boot that loaded every stored graph yet profiled for minutes compiled their Triton kernels again
        # (lab-vllm-0.20.2-h100/outside: 119-139 s, 0.38 GiB against 0.30 fully warm); one that compiled any graph
        # anew logs "Compiling a graph" and is cold (lab-vllm-0.26.0-h100/q9-g-fp8-mtp2-32k-cold: 2.07 GiB)
        cache = "warm-jit"
    elif cache is None and flags.enforce_eager and slow:
        cache = "fresh"
    if cache:
        flags = replace(flags, compile_cache=cache)
    src = resolve_model(model_ref_from_log(facts, model))
    rules = rules_for(facts.vllm_version)
    if facts.sampler == "flashinfer" and rules.sampler == "sort":  # 0.10.0-0.11.0 with FlashInfer installed
        rules = replace(rules, sampler="kernel")
    d = resolve(src, gpu_from_log(facts, gpu), rules, flags)
    try:
        pp, dp = int(facts.args.get("pipeline_parallel_size", 1)), int(facts.args.get("data_parallel_size", 1))
    except (TypeError, ValueError):
        raise UserError("the log's non-default args hold a parallel size that is not a number; pass the flags "
                        "yourself") from None
    if pp < 1 or dp < 1:
        raise UserError(f"the log's parallel sizes (pipeline {pp}, data {dp}) are not what vLLM starts with")
    d = d.with_(pp=pp, dp=dp, expert_parallel=bool(facts.args.get("enable_expert_parallel")))
    if facts.vllm_version and facts.vllm_version[:1].isdigit():
        # the exact release the log states: the model runner and the rules keyed inside a range (a backend's floor)
        # follow it, not the range's first release (a 0.22.0 log of Qwen3-8B says "Using V2 Model Runner")
        from .vllm_rules import choose_version

        d = d.with_(vllm=choose_version(facts.vllm_version))
    return replace(d, int4_kernel=facts.int4_kernel) if facts.int4_kernel else d


def logged_worker(d: Deployment) -> Deployment:
    """The worker whose figures a log states: with pipeline parallel the first stage's (vLLM 0.19+ prints its
    budget lines from the worker on GPU 0 only); else the deployment itself."""
    if d.pp == 1 or not (d.pp_first and d.pp_last):  # one GPU, or already a stage
        return d
    from .parallel import ranks, stage_deployment

    return stage_deployment(d, ranks(d, d.pp, [d.gpu])[0], d.pp)  # d.pp_partition: the split it ran with


@dataclass
class Comparison:
    facts: LogFacts
    prediction: Prediction
    rows: list[tuple[str, float | None, float, float | None]]  # term, logged GiB, predicted GiB, error


def compare(facts: LogFacts, d: Deployment, c: Coefficients | None = None) -> Comparison:
    c = c or coeffs.load(d.rules.version, d.gpu.key, d.model.ref)
    p = predict(logged_worker(d), c)
    b = p.budget

    def row(name: str, logged: float | None, predicted_bytes: float) -> tuple[str, float | None, float, float | None]:
        pred = predicted_bytes / GiB
        return name, logged, pred, None if logged is None else pred - logged

    rows = [
        row("requested (GMU budget)", facts.requested_gib, b.requested_bytes),
        row("weights (incl. drafter)", facts.weights_gib, b.weights_bytes + b.mtp_weights_bytes),
        row("activation peak", facts.activation_gib, b.activation_bytes),
        # 0.27+ logs state what loading and profiling consumed: beyond the weights, the non-torch growth and the
        # buffers the model runner keeps (Model Runner V2's per-request state, a kept fused-MoE scratch)
        row("non-torch + kept buffers" if b.runner_buffers_bytes else "non-torch", facts.non_torch_gib,
            b.non_torch_bytes + b.runner_buffers_bytes),
        row("CUDA graph estimate", facts.cudagraph_estimate_gib if not d.enforce_eager else None, b.cudagraph_bytes),
        row("available KV cache", facts.available_kv_gib, b.available_kv_bytes),
    ]
    return Comparison(facts, p, rows)


def available_from_log(facts: LogFacts, d: Deployment, leave_out: str | None = None,
                       weights_from_log: bool = False) -> tuple[Prediction, float]:
    """The prediction for a log's deployment and the available KV memory it gives, in GiB. `leave_out`: the log's
    file name, so that a coefficient taken from that log alone is not used to predict it (leave-one-out);
    `weights_from_log`: the weights term as the log's 'Model loading took' states it (a quantized checkpoint whose
    quantization config is not in hand), every other term predicted."""
    p = predict(d, coeffs.load(d.rules.version, d.gpu.key, d.model.ref, leave_out=leave_out))
    b = p.budget
    available = b.available_kv_bytes / GiB
    if weights_from_log:
        if facts.weights_gib is None:
            raise UserError("the log has no 'Model loading took' line, so its weights term cannot be taken from it")
        available += (b.weights_bytes + b.mtp_weights_bytes) / GiB - facts.weights_gib
    return p, available


def compare_file(path: Path, model: str | None = None, gpu: GPU | None = None,
                 c: Coefficients | None = None, drafter: str | None = None,
                 pp_partition: str | None = None) -> Comparison:
    """`pp_partition`: the VLLM_PP_LAYER_PARTITION the startup ran with (a log does not state it)."""
    facts = parse_log(read_text(path))
    return compare(facts, deployment_from_log(facts, model, gpu, drafter).with_(pp_partition=pp_partition), c)


def meaning(cmp: Comparison) -> str:
    """What the log's outcome means, in plain words, with the change that fixes it."""
    import math

    from .prediction import min_gmu_for_bytes

    f, p = cmp.facts, cmp.prediction
    d = p.deployment
    total = d.gpu.total_bytes
    if f.outcome == "kv_too_small":
        asked = f.args.get("max_model_len") or d.max_model_len
        need, left = f.needed_kv_gib, f.available_kv_gib
        text = f"max_model_len {int(asked):,}"
        if need is not None and left is not None:
            text += f" needs {need:.2f} GiB of KV cache, {left:.2f} GiB were left"
        if f.estimated_max_model_len is not None:
            text += f": the ceiling at this GMU is {f.estimated_max_model_len:,}"
        fixes = []
        if need is not None and left is not None and f.requested_gib is not None:
            non_kv = int((f.requested_gib - left) * GiB)
            g = min_gmu_for_bytes(d, non_kv, int(need * GiB))
            fixes.append(f"raise GMU to {g:.2f}" if g else "no GMU is enough on this GPU")
        if d.mtp:
            no_mtp = predict(d.with_(spec_tokens=0, auto_fit=True), coeffs.load(d.rules.version, d.gpu.key, d.model.ref))
            fixes.append(f"drop MTP (predicted ceiling without it: {no_mtp.ceiling:,})")
        fixes.append("or lower --max-model-len")
        return text + "; " + ", ".join(fixes)
    if f.outcome == "insufficient_free_memory":
        free = f.free_at_start_gib
        g = math.floor(free * GiB / total * 100) / 100 if free else None
        return (f"only {free:.2f} GiB were free when vLLM started, less than the GMU budget"
                + (f"; lower --gpu-memory-utilization to {g:.2f}" if g else "")
                + " or stop what else holds the GPU (the CUDA context and other processes sit outside the budget)")
    if f.outcome.startswith("oom_"):
        where = {"oom_loading": "while loading the weights: they do not fit",
                 "oom_profiling": "while profiling (weights loaded, KV cache not yet allocated): the activation "
                                  "peak did not fit in what was free",
                 "oom_kv_allocation": "while allocating the KV cache",
                 "oom_graph_capture": "while capturing CUDA graphs: the graph pool did not fit beside the KV cache"}
        text = "CUDA ran out of memory " + where.get(f.outcome, "")
        if f.compile == "cold":
            text += "; this boot compiled from a cold torch.compile cache, which profiles a larger peak: a restart " \
                    "(Restart=on-failure) usually succeeds"
        if f.outcome == "oom_graph_capture":
            text += "; lower GMU by the graph estimate or use --enforce-eager"
        elif f.outcome == "oom_profiling":
            text += "; lower --max-num-batched-tokens or --max-num-seqs, or GMU"
        return text
    if f.outcome == "crashed":
        return f"vLLM crashed: {f.error or 'see the traceback in the log'}"
    if f.outcome == "started":
        mml = f.max_model_len or d.max_model_len
        text = f"started with max_model_len {mml:,}"
        if f.kv_cache_tokens is not None:
            text += f", GPU KV cache {f.kv_cache_tokens:,} tokens"
        if f.concurrency is not None:
            text += f" ({f.concurrency:.2f}x concurrency)"
        text += f"; predicted ceiling at GMU {d.gmu:.2f}: {p.ceiling:,}"
        from .logparse import unmodelled_args

        left_out = unmodelled_args(f.args)
        if d.lora_left_out:
            left_out.append(f"enable_lora: {d.lora_left_out}")
        return text + (f" (the prediction leaves out what it does not model: {'; '.join(left_out)})" if left_out
                       else "")
    return "the log ends before vLLM finished starting (cut off, or still running)"


def cross_check(facts: LogFacts, d: Deployment, flags_given: dict | None = None,
                weights_gib: float | None = None) -> list[str]:
    """Where the log's own figures disagree with the deployment read from it (a missing or wrapped args line, a
    flag the log lacks): each a warning naming the figure and the flag that would fix it."""
    out: list[str] = []
    given = flags_given or {}
    if facts.cut_last_line:
        out.append(f"the log ends mid-line ({facts.cut_last_line[-60:]!r}, no newline): that line is not read")
    if not facts.args_line:
        out.append("the log has no 'non-default args' line: its flags are taken as vLLM's defaults (GMU "
                   f"{d.gmu:.2f}, TP {d.tp}, max_model_len {d.max_model_len:,}) unless you pass them (--gmu, -tp, "
                   "--max-model-len ...)")
    stated = flags_from_args(facts.args) if given else {}
    for k, v in given.items():
        logged = stated.get(k)
        if logged is not None and logged != v:
            out.append(f"{k} {v} given, the log states {logged}: explained with yours")
    if facts.requested_gib is not None:
        budget = d.gpu.total_bytes * d.gmu / GiB
        if abs(budget - facts.requested_gib) > 0.02:
            out.append(f"the log requested {facts.requested_gib:.2f} GiB per GPU, the deployment read from it "
                       f"{budget:.2f} GiB (GMU {d.gmu:.2f} of {d.gpu.total_gib:.2f} GiB): pass --gmu or --gpu as it ran")
    if weights_gib and facts.weights_gib and abs(weights_gib - facts.weights_gib) > max(0.5, 0.25 * facts.weights_gib):
        out.append(f"weights per GPU: the log loaded {facts.weights_gib:.2f} GiB, the deployment read from it "
                   f"predicts {weights_gib:.2f}: is the tensor parallel size (-tp) or the checkpoint (--model) right?")
    if d.pp > 1:
        out.append(f"pipeline parallel {d.pp}: the terms above are the first stage's (PP0 TP0, the worker vLLM 0.19+ "
                   "prints 'Available KV cache memory' from), against that worker's own plan; every worker's own "
                   "budget line, where the log has one (0.10.x, 0.26+), is compared below it")
    if facts.workers > 1 and facts.workers != d.tp * d.pp * d.dp:
        out.append(f"the log names {facts.workers} worker processes, the deployment has {d.tp * d.pp * d.dp} (TP "
                   f"{d.tp} x PP {d.pp} x DP {d.dp}): pass -tp as it ran")
    return out


def per_worker(text: str, d: Deployment, c: Coefficients | None = None) -> list[dict]:
    """A multi-GPU log's workers, each its own budget line (vLLM 0.10.x and 0.26+) next to that worker's plan
    (parallel.plan_ranks, in the same rank order); [] where the log has fewer than two such lines."""
    from .logparse import worker_budgets
    from .parallel import plan_ranks

    logged = worker_budgets(text)
    if len(logged) < 2 or len(logged) != d.tp * d.pp:
        return []
    c = c or coeffs.load(d.rules.version, d.gpu.key, d.model.ref)
    plans = plan_ranks(d, c)
    out = []
    for p, w in zip(plans, logged):
        b = p.prediction.budget
        out.append({"worker": w.who, "rank": p.rank.name, "layers": p.rank.layers,
                    "weights_logged_gib": w.weights_gib, "weights_predicted_gib": round(b.weights_bytes / GiB, 2),
                    "activation_logged_gib": w.activation_gib,
                    "activation_predicted_gib": round(b.activation_bytes / GiB, 2),
                    "kv_logged_gib": w.kv_gib, "kv_predicted_gib": round(b.available_kv_bytes / GiB, 2),
                    "kv_error_gib": round(b.available_kv_bytes / GiB - w.kv_gib, 2), "kv_blocks": p.num_blocks})
    return out


def explain_json(cmp: Comparison, warnings: list[str] | None = None, boots: tuple[int, int] = (1, 1)) -> dict:
    return {"startup": boots[0], "startups_in_log": boots[1], "warnings": warnings or [],
            "outcome": cmp.facts.outcome, "meaning": meaning(cmp), "inputs": cmp.prediction.deployment.inputs(),
            "terms": [{"term": t, "logged_gib": lg, "predicted_gib": round(pr, 4),
                       "difference_gib": None if e is None else round(e, 4)} for t, lg, pr, e in cmp.rows],
            "facts": cmp.facts.to_dict()}


# the lines a full explanation reads: (LogFacts field, the line as vLLM prints it, what it gives)
KEY_LINES = (
    ("vllm_version", "the version line ('vLLM API server version' / 'Initializing a V1 LLM engine (vX)')",
     "which vLLM's rules apply"),
    ("args", "'non-default args'", "the flags: model, GMU, KV dtype, max_model_len, eager, TP, speculative config"),
    ("total_gib", "'Free memory on device (A/B GiB)' or the worker memory snapshot (DEBUG level)",
     "the GPU's total memory (or pass --gpu)"),
    ("weights_gib", "'Model loading took'", "the weights vLLM loaded"),
    ("activation_gib", "'Memory profiling takes' (DEBUG level)", "the profiled peak and non-torch memory"),
    ("available_kv_gib", "'Available KV cache memory'", "the KV cache memory"),
    ("kv_cache_tokens", "'GPU KV cache size'", "the KV plan's token count"),
)


def stated(facts: LogFacts) -> dict[str, object]:
    """The figures a log states, by name (what a cut log can still tell)."""
    out: dict[str, object] = {}
    for name in ("vllm_version", "total_gib", "free_at_start_gib", "weights_gib", "activation_gib", "non_torch_gib",
                 "cudagraph_estimate_gib", "available_kv_gib", "block_size", "kv_cache_tokens", "concurrency",
                 "concurrency_len", "max_model_len", "estimated_max_model_len", "needed_kv_gib"):
        v = getattr(facts, name)
        if v is not None:
            out[name] = v
    for k in ("model", "gpu_memory_utilization", "kv_cache_dtype", "max_model_len", "tensor_parallel_size",
              "enforce_eager", "speculative_config", "max_num_seqs", "max_num_batched_tokens"):
        if k in facts.args:
            out[f"args.{k}"] = facts.args[k]
    return out


def missing_lines(facts: LogFacts) -> list[tuple[str, str]]:
    """(line, what it gives) for each key line the log lacks."""
    return [(line, gives) for name, line, gives in KEY_LINES if not getattr(facts, name)]


def partial_json(facts: LogFacts, why: str) -> dict:
    return {"partial": True, "outcome": facts.outcome, "no_prediction": why, "stated": stated(facts),
            "missing": [{"line": line, "gives": gives} for line, gives in missing_lines(facts)]}


def deployment_from_record(rec: dict) -> Deployment:
    """The deployment a probe record describes (its model falls back to a bundled profile by name)."""
    i = rec["inputs"]
    ref = str(i["model"])
    if not Path(ref).exists() and ref.rstrip("/").split("/")[-1].lower() in bundled_models():
        ref = ref.rstrip("/").split("/")[-1].lower()
    gpu_key = rec.get("gpu_key")
    gpu = catalog().get(gpu_key) if gpu_key in catalog() else from_memory(int(i["gpu_total_bytes"]))
    flags = Flags(gpu_memory_utilization=i["gpu_memory_utilization"], kv_cache_dtype=i["kv_cache_dtype"],
                  enforce_eager=i["enforce_eager"], num_speculative_tokens=i["num_speculative_tokens"],
                  speculative_method=i.get("speculative_method") or "mtp", max_num_seqs=i["max_num_seqs"],
                  max_num_batched_tokens=i["max_num_batched_tokens"], max_model_len=i["max_model_len"],
                  enable_prefix_caching=i["enable_prefix_caching"], tensor_parallel_size=i["tensor_parallel_size"],
                  compile_cache=(rec.get("facts") or {}).get("compile") or i["compile_cache"],
                  language_model_only=i["language_model_only"],
                  lora=LoraSlots(i["lora"]["max_loras"], i["lora"]["max_lora_rank"], i["lora"]["fully_sharded_loras"])
                  if i.get("lora") else None)
    return resolve(resolve_model(ref), gpu, rules_for(rec.get("vllm_version") or i.get("vllm_version")), flags)


@dataclass
class Explained:
    """One startup of a log next to its prediction: `explain --json`'s object, and what the text view draws."""

    json: dict
    comparison: Comparison | None  # None: the log lacks what a prediction needs (`json` says what it still states)
    warnings: list[str]
    workers: list[dict]


def boot_index(boot: int | None, n: int, name: str) -> int:
    """The index of the startup --boot names among a log's n (default: the last)."""
    pick = -1 if boot is None else boot
    if pick == 0 or not -n <= pick <= n:
        raise UserError(f"--boot {pick}: {name} holds {n} startup(s); give 1 to {n}, or -1 for the last")
    return pick - 1 if pick > 0 else n + pick


def explain_log(text: str, name: str, model: str | None = None, card: GPU | None = None, drafter: str | None = None,
                given: dict | None = None, boot: int | None = None) -> Explained:
    """A log's startup (the last unless `boot`) read, its deployment predicted and compared term by term, the log's
    own figures cross-checked and every worker's budget line; where the log lacks what a prediction needs and the
    user gave nothing, what it still states."""
    from .logparse import require_vllm, split_startups

    given = given or {}
    boots = split_startups(text) or [text]
    n = len(boots)
    index = boot_index(boot, n, name)
    facts = require_vllm(parse_log(boots[index]), name)
    try:
        d = deployment_from_log(facts, model, card, drafter, given)
    except UserError as e:
        if model or card or drafter or given:  # what the user gave is wrong: theirs to fix
            raise
        return Explained(partial_json(facts, str(e)), None, [], [])
    cmp = compare(facts, d)
    b = cmp.prediction.budget
    warnings = cross_check(facts, d, given, (b.weights_bytes + b.mtp_weights_bytes) / (1 << 30))
    if n > 1:
        warnings.insert(0, f"{name} holds {n} startups: this is startup {index + 1} "
                           f"({'the last; ' if index == n - 1 else ''}--boot N for another)")
    workers = per_worker(boots[index], d)
    return Explained({**explain_json(cmp, warnings, (index + 1, n)), "workers": workers}, cmp, warnings, workers)
