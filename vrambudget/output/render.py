"""Tables for people (tabulate). Every row names the formula or coefficient it comes from."""

from __future__ import annotations

from typing import Any

from tabulate import tabulate

from ..coefficients import Coefficients
from ..deployment import Deployment, gmu_flag
from ..hardware.facts import gdn_prefill_path, unified_memory_band
from ..prediction import Answer, Prediction
from ..runtime import Verdict
from ..units import GiB, MiB


def g(n: float) -> str:
    return f"{n / GiB:.2f}"


def subject_line(d: Any, defaulted: tuple[str, ...] = ()) -> str:
    """The answer's first line: the model, the GPU and the vLLM version it is for; a default the user did not choose
    (the model, the GPU) is said, with the flag that changes it."""
    said = {"model": "the default model: -m names yours", "gpu": "the default GPU: --gpu names yours"}
    notes = [said[k] for k in defaulted if k in said]
    from itertools import groupby

    runs = [(g, len(list(same))) for g, same in groupby(d.gpus or (d.gpu,), key=lambda g: g)]
    on = " + ".join(f"{n} x " * (n > 1) + f"{g.name} ({g.total_gib:.2f} GiB)" for g, n in runs)
    hosts = f" over {d.nodes} hosts" if d.nodes > 1 else ""
    return (f"For {d.model.ref} on {on}{hosts}, {d.version_label}"
            + (f" [{'; '.join(notes)}]" if notes else "") + ":")


def ranks_text(d: Any, plans: list, bad: Any) -> str:
    """Several workers: one row each (its GPU, layers, budget terms, KV blocks, ceiling), then which one decides."""
    rows = [[r.rank.name + (" <- worst" if r is bad else ""), r.rank.gpu.name,
             f"{r.rank.first_layer}-{r.rank.first_layer + r.rank.layers - 1}" if r.rank.layers else "-",
             g(r.prediction.budget.requested_bytes), g(r.prediction.budget.weights_bytes),
             g(r.prediction.budget.activation_bytes), g(r.prediction.budget.available_kv_bytes),
             f"{r.num_blocks:,}", f"{r.prediction.ceiling:,}"] for r in plans]
    table = tabulate(rows, headers=["rank", "GPU", "layers", "budget", "weights", "activation", "KV GiB", "KV blocks",
                                    "ceiling"], tablefmt="simple", disable_numparse=True)
    engines = (f"; each of the {d.dp} data-parallel engines plans alone, as here" if d.dp > 1 else "")
    return (f"{len(plans)} workers (PP {d.pp} x TP {d.tp}){engines}. vLLM gives every worker the fewest KV blocks any "
            f"has: {bad.rank.name} on {bad.rank.gpu.name} decides ({bad.num_blocks:,} blocks, ceiling "
            f"{bad.prediction.ceiling:,} tokens).\n{table}\n\nThe deciding worker, {bad.rank.name}, in full:")


def header(p: Prediction) -> str:
    d = p.deployment
    a = d.model.arch
    mode = "eager" if d.enforce_eager else f"CUDA graphs ({d.compile_cache} compile cache)"
    mtp = f"{d.speculative_method.upper()} {d.spec_tokens} tokens" if d.spec_tokens else "no speculative decoding"
    b = p.budget
    return (f"{d.model.ref} ({d.model.description}) on {d.gpu.name} ({d.gpu.total_gib:.2f} GiB as CUDA reports it"
            f"{'' if d.gpu.measured else ', ' + d.gpu.source.split(':')[0].split(' (')[0]}"
            f"{f'; {d.gpu.sms} SMs, {d.gpu.architecture}' if d.gpu.sms else ''}; attention {b.backend.label}"
            + (f", GDN prefill {gdn_prefill_path(d.gpu, d.gdn_prefill_backend)}" if d.model.arch.gdn is not None else "") + ")\n"
            f"{d.version_label} | GMU {d.gmu:.2f} | KV {d.kv_cache_dtype} | {mode} | {mtp} | "
            f"max_num_seqs {d.max_num_seqs} | max_num_batched_tokens {d.max_num_batched_tokens} | TP {d.tp}"
            + (" | prefix caching" if d.enable_prefix_caching else "")
            + (" | expandable segments" if d.expandable_segments else "")
            + (f" | FlashInfer workspace {d.flashinfer_workspace_bytes / MiB:.0f} MiB"
               if d.flashinfer_workspace_bytes is not None else "")
            + (" | language model only" if a.is_multimodal and d.language_model_only else ""))


def host_share_note(d: Deployment) -> str:
    """On unified memory the available KV is an upper bound: the host's share during the profile comes off it."""
    if not d.gpu.unified_memory:
        return ""
    return (f"; AT MOST: the host's share of unified memory during the profile (not predicted; "
            f"{unified_memory_band()} on public boots) comes off it")


def budget_table(p: Prediction) -> str:
    b, d = p.budget, p.deployment
    q = d.model.arch.quantization
    wsrc = ("safetensors headers (exact)" if b.weights_source == "safetensors" else
            f"config shapes{' + ' + _quant_words(q) if q else ' x ' + d.model.arch.dtype}")
    rows: list[list[Any]] = [
        ["budget = ceil(total x GMU)", g(b.requested_bytes), f"{d.gpu.total_bytes:,} B x {gmu_flag(d.gmu)}"],
        ["weights (target)", g(b.weights_bytes), f"{wsrc} + load overhead" + (
            f" + LoRA slots ({d.lora.max_loras} x rank {d.lora.max_rank})"
            if d.lora is not None and not d.lora_left_out else "")],
        ["MTP drafter weights" if d.drafter is None else "DFlash drafter weights", g(b.mtp_weights_bytes),
         "fc + decoder layer(s); shares embed/lm_head" if d.mtp else
         f"ESTIMATE: {d.drafter.name} config x {d.model.arch.dtype}; shares embed/lm_head" if b.mtp_weights_bytes
         else "off"],
        ["activation peak (profile_run)", g(b.activation_bytes),
         activation_formula(d, p.coefficients)
         + (f" + {b.backend.name} workspace {b.backend.profiled_bytes / MiB:.0f} MiB" if b.backend.profiled_bytes else "")],
        ["non-torch memory", g(b.non_torch_bytes), "vLLM's startup logs (NCCL, cuBLAS workspaces, kernels loaded)"],
        *([["kept buffers (model runner)", g(b.runner_buffers_bytes),
            "V2's per-request state (max_num_seqs x vocab x 4 B and masks)"
            + (" + the kept fused-MoE scratch" if d.model.arch.moe is not None and d.rules.moe_workspace_kept else "")
            + "; vLLM 0.27+ counts what stays"]] if b.runner_buffers_bytes else []),
        ["CUDA graphs (estimate)", g(b.cudagraph_bytes),
         f"{b.num_cudagraphs} graphs" + ("" if b.cudagraph_in_budget else ", not subtracted by this version")
         if not d.enforce_eager else "eager: none"],
        ["= non-KV total", g(b.non_kv_bytes), ""],
        ["KV cache available", g(b.available_kv_bytes), "budget - non-KV" + host_share_note(d)],
        ["CUDA context (outside budget)", g(b.cuda_context_bytes),
         ("measured" if b.cuda_context.measured else f"ESTIMATE ({b.cuda_context.kind or 'estimate'}; gpu_facts.json)")
         + "; must leave free >= budget"],
        ["left outside budget at runtime", g(b.runtime_margin_bytes), "free at start - budget"],
    ]
    return tabulate(rows, headers=["term", "GiB", "from"], tablefmt="simple", disable_numparse=True)


def block_row(lay) -> list[str]:
    """The block size row: the hybrid's alignment, the backend default, or per-kind sizes where vLLM unified
    unequal pages by growing the smaller page's block (Gemma 4: full 32, sliding 16)."""
    sizes = {b.kind.label: b.spec.block_size for b in lay.buckets if hasattr(b.spec, "block_size")}
    if lay.hybrid:
        return ["block size", f"{lay.block_size} tokens", "hybrid: attention page >= GDN state"]
    if len(set(sizes.values())) > 1:
        return ["block size", " / ".join(f"{k} {v}" for k, v in sizes.items()) + " tokens",
                "pages unified: the smaller page's block grows"]
    return ["block size", f"{lay.block_size} tokens", "backend default"]


def plan_table(p: Prediction) -> str:
    pl, lay, d = p.plan, p.plan.layout, p.deployment
    kinds = ", ".join(f"{b.num_layers} {b.kind.label} in {lay.groups(b)} group(s)" for b in lay.buckets)
    pads = "; ".join(f"{n} ({pct:.2f}%)" for n, pct in lay.padding_warnings) or "0"
    rows = [
        block_row(lay),
        ["KV groups", f"{lay.num_groups} x {lay.group_size} layers", kinds],
        ["padding layers", pads, "vLLM: 'Add P padding layers'"],
        ["bytes per block", f"{lay.bytes_per_block / MiB:.2f} MiB", "group size x page"],
        ["KV blocks", f"{pl.num_blocks:,}", "available // bytes per block"],
        ["blocks per request", f"{pl.blocks_per_request:,}", f"at max_model_len {pl.max_model_len:,}"
         + (f" (mamba mode {d.mamba_mode})" if lay.hybrid else "")],
        ["GPU KV cache size", f"{pl.kv_cache_tokens:,} tokens", "as vLLM logs it"],
        ["max concurrency", f"{pl.max_concurrency:.2f}x", f"requests of {pl.max_model_len:,} tokens"],
        ["CEILING max_model_len", f"{p.ceiling:,} tokens",
         f"none starts: {', '.join(x.check.value for x in p.refusals)} (see below)" if p.refusals else "longest that starts"
         + (" (capped at the model's maximum)" if p.ceiling < pl.ceiling else "")],
    ]
    return tabulate(rows, headers=["KV plan", "value", "how"], tablefmt="simple", disable_numparse=True)


def _fix(p: Prediction) -> str:
    """The one change that makes the asked-for length start."""
    d = p.deployment
    if p.plan.ceiling and p.budget.available_kv_bytes > 0:
        from ..kv.planner import kv_needed_bytes
        from ..prediction import layout_for, min_gmu_for_bytes

        g = min_gmu_for_bytes(d, p.budget.non_kv_bytes, kv_needed_bytes(layout_for(d), d.max_model_len, d.rules))
        auto = "" if p.ceiling < min(p.plan.ceiling, d.model.arch.max_position_embeddings) else " (or auto)"
        return (f"pass --max-model-len {p.ceiling}{auto}"
                + (f", or raise --gpu-memory-utilization to {g:.2f}" if g and g > d.gmu else ""))
    return p.reasons[0] if p.reasons else "see below"


def _short(source: str, n: int = 110) -> str:
    s = source.replace("measured: ", "").replace("estimate: ", "")
    return s if len(s) <= n else s[: n - 3].rsplit(" ", 1)[0] + "..."


def answer_lines(a: Answer) -> list[str]:
    """The headline, before any table: ceilings on the first boot and after a restart, whether the asked-for
    max_model_len starts, the one change that makes it start, and the verdicts (yes / at the edge / no, the margin,
    its measured band and the unknown that decides it) for starting and serving. Where one of vLLM's start checks
    refuses the flags at any length: that first, with vLLM's message, the fix, and the answer with the fix."""
    d = a.restart.deployment
    lines = refusal_lines(a) if a.refusals else ceiling_lines(a)
    if d.defaults:
        lines.append(f"Not chosen by you (vLLM {d.rules.version} defaults on this GPU): {', '.join(map(str, d.defaults))}.")
    if a.restart.estimated:
        lines.append(f"Estimated, not measured here: {'; '.join(a.restart.estimated)}.")
    return lines


def refusal_lines(a: Answer) -> list[str]:
    """The start checks that refuse these flags whatever max_model_len, each with vLLM's message and fix, then the
    answer with the fix applied (a.fixed)."""
    lines = []
    for chk in a.refusals:
        boots = [name for name, p in (("first boot", a.first_boot), ("restart", a.restart))
                 if any(x.check == chk.check for x in p.refusals)]
        when = "" if a.same or len(boots) == 2 else f" (on the {boots[0]} only)"
        lines.append(f"Does not start at any max_model_len{when}: vLLM refuses: \"{chk.vllm_message}\"")
        lines.append(f"Fix: {chk.fix}.")
    if a.fixed is not None:
        fixed, asked = a.fixed.restart.deployment, a.restart.deployment
        flag = (f"--gpu-memory-utilization {fixed.gmu:.2f}" if fixed.gmu != asked.gmu else
                f"--max-num-seqs {fixed.max_num_seqs}")
        core = refusal_lines(a.fixed) if a.fixed.refusals else ceiling_lines(a.fixed)
        lines.append(f"With {flag}: {core[0]}")
        lines += core[1:]
    return lines


def ceiling_lines(a: Answer) -> list[str]:
    """Ceilings on the first boot and after a restart, whether the asked-for length starts, and the verdicts."""
    f, r = a.first_boot, a.restart
    d = r.deployment
    fc = f.ceiling if f.plan.ceiling else 0
    rc = r.ceiling if r.plan.ceiling else 0
    lines = []
    if a.same:
        which = ("as planned with --compile-cache fresh: a machine's first boot" if d.compile_cache == "fresh" else
                 "eager: every boot but a machine's first gets the same KV cache; see the warnings"
                 if any("first boot on a new machine" in w for w in r.warnings)
                 else "eager: every boot gets the same KV cache")
        lines.append(f"Longest context: {rc:,} tokens ({which}).")
    else:
        o = a.restart_other
        other = ""
        if o is not None:
            oc = o.ceiling if o.plan.ceiling else 0
            other = (f"; {oc:,} where the Triton cache (~/.triton) is not kept" if o.deployment.compile_cache ==
                     "warm-jit" else f"; {oc:,} where the Triton cache is kept")
        state = "compile cache warm" if d.compile_cache == "warm" else "compile cache warm, Triton kernels compiled again"
        lines.append(f"Longest context: {fc:,} tokens on the first boot after a change (torch.compile runs cold), "
                     f"{rc:,} after a restart ({state}{other}).")
    what = f"max_model_len {d.max_model_len:,}" + ("" if d.max_model_len_given else " (vLLM's default: the model's maximum)")
    if d.auto_fit:
        lines.append(f"--max-model-len auto: vLLM fits it to {f.max_model_len:,} on a first boot"
                     + ("" if a.same else f", {r.max_model_len:,} on a restart") + ".")
    elif f.starts and r.starts:
        lines.append(f"{what} starts" + ("" if a.same else " on both boots") + ".")
    elif r.starts:
        lines.append(f"{what} starts after a restart but not on the first boot: keep Restart=on-failure "
                     f"(systemd) or start cold with --max-model-len {fc:,}.")
    else:
        lines.append(f"{what} does not start: {_fix(r)}.")
    lines += verdict_lines(r, a.same)
    return lines


def _band(v: Verdict) -> str:
    lo, hi = (v.margin_bytes + v.low_bytes) / GiB, (v.margin_bytes + v.high_bytes) / GiB
    return f"margin {v.margin_bytes / GiB:+.2f} GiB" + (f" (measured band {lo:+.2f} to {hi:+.2f})" if lo != hi else "")


def verdict_lines(p: Prediction, same: bool = True) -> list[str]:
    """One line per verdict of a (restart) prediction: starts, the first request, the long prompt; and where the
    attention backend's first-request buffers decide it, the ways out with their cost."""
    v, rt = p.verdicts, p.runtime
    if not v or rt is None:
        return []
    when = "" if same else " after a restart"
    d = p.deployment
    if d.auto_fit or not d.max_model_len_given:  # vLLM fits the length itself (or refuses its default): the band
        lo, hi = p.ceiling_band or (p.ceiling, p.ceiling)  # of the ceiling is the answer
        host = " and the host's share of unified memory" if d.gpu.unified_memory else ""
        out = [f"Ceiling{when}: {p.ceiling:,} tokens by the model, {lo:,} to {hi:,} within the activation peak's "
               f"measured spread{host}."] if lo != hi else []
    else:
        out = [f"Starts{when}: {v['starts'].answer.upper()}, {_band(v['starts'])}"
               + (f"; {v['starts'].deciding}" if v['starts'].deciding else "") + "."]
    ws = next((t for t in rt.terms if t.stage == "first" and t.bytes), None)
    first = v["first request"]
    label = ws.name.split(":")[0].split(", ") if ws else []
    out.append(f"First request: {first.answer.upper()}, {_band(first)}"
               + (f": {label[0]}'s workspaces ({label[1]}, {ws.bytes / GiB:.2f} GiB) arrive with it" if ws else "")
               + (f"; {first.deciding}" if first.deciding else "") + ".")
    prompt = v["prompt"]
    sg = ("" if rt.prompt_too_long else f"; highest GMU that serves it: {p.max_serving_gmu:.2f}" if p.max_serving_gmu
          else "; no GMU serves it")
    out.append(f"A {rt.prompt_tokens:,}-token prompt: {prompt.answer.upper()}, {_band(prompt)}"
               + (f"; {prompt.deciding}" if prompt.deciding else "") + sg + ".")
    if ws and (first.answer != "yes" or prompt.answer != "yes"):
        out.append("Way out where FlashInfer's workspaces decide it: " + backend_advice(p, ws))
    return out


def backend_advice(p: Prediction, ws) -> str:
    """The ways out where the attention backend's first-request buffers decide whether a deployment serves, each
    with its cost: another backend, a smaller workspace, a lower GMU."""
    from ..runtime import max_serving_gmu

    d, rt = p.deployment, p.runtime
    builders = int(ws.name.split(", ")[1].split(" ")[0]) if ", " in ws.name else 1
    stage = "first" if p.verdicts["first request"].answer != "yes" else "prompt"
    v = p.verdicts["first request" if stage == "first" else "prompt"]
    short = -v.margin_bytes - v.low_bytes  # what it lacks at the low end of the band
    each = ws.bytes // builders
    smaller = (each - -(-short // builders)) // MiB * MiB
    g = max_serving_gmu(d.gpu.total_bytes, p.budget.free_at_start_bytes, rt.need_for(stage) - v.low_bytes)
    ways = ["--attention-backend TRITON_ATTN (no workspace; it captures FULL decode graphs with a drafter; its decode "
            "speed against FlashInfer's is not measured here)"]
    if smaller > 0:
        ways.append(f"VLLM_FLASHINFER_WORKSPACE_BUFFER_SIZE={smaller} ({smaller // MiB} MiB for each of the {builders} "
                    f"workspaces instead of {each // MiB}; whether FlashInfer's plans fit a smaller workspace at this "
                    "batch size is not measured)")
    if g:
        ways.append(f"--gpu-memory-utilization {g:.2f} (less KV cache)")
    return "; ".join(ways) + "."


def _quant_words(q: dict) -> str:
    """A quantization config in a few words: 'awq 4-bit', 'fp8' (no bits where the config states none)."""
    bits = q.get("bits") or q.get("weight_bits")
    return f"{q.get('quant_method', 'quantized')}" + (f" {bits}-bit" if bits else "")


def runtime_table(p: Prediction) -> str:
    rt = p.runtime
    if rt is None:
        return ""
    rows = [[t.name, g(t.bytes), ("measured: " if t.measured else "") + _short(t.source)]
            for t in [*rt.held, *rt.terms]]
    net = ("= needed outside the budget" if rt.need_bytes >= 0 else
           "= freed outside the budget (vLLM releases more after startup than the prompt takes)")
    rows += [[net, g(rt.need_bytes), f"a {rt.prompt_tokens:,}-token prompt"],
             ["left outside the budget", g(rt.margin_bytes), "free at start - budget"]]
    return tabulate(rows, headers=["after startup", "GiB", "from"], tablefmt="simple", disable_numparse=True)


def prediction_text(p: Prediction, a: Answer | None = None) -> str:
    parts = (answer_lines(a) + [""]) if a else []
    parts += [header(p), "", budget_table(p), "", plan_table(p), ""]
    rt = "" if p.refusals else runtime_table(p)  # nothing to serve where vLLM refuses to start
    if rt:
        parts += [rt, ""]
    if p.starts:
        parts.append(f"STARTS: max_model_len {p.max_model_len:,} fits; the ceiling at GMU {p.deployment.gmu:.2f} "
                     f"is {p.ceiling:,} tokens.")
    else:
        parts.append("DOES NOT START: " + " | ".join(p.reasons))
    parts += [f"warning: {w}" for w in p.warnings]
    return "\n".join(parts)


def table_text(t: dict[str, Any], target: dict[str, float | None] | None, tokens: int | None,
               target_first: dict[str, float | None] | None = None) -> str:
    """Graph columns show 'first boot / restart'; eager columns one figure (both boots are the same)."""
    cols = t["columns"]

    def cell(r: dict[str, Any], col: str) -> str:
        warm, cold = r["ceilings"][col], r["ceilings_first_boot"][col]
        fmt = lambda v: f"{v:,}" if v else "-"  # noqa: E731
        verdict = r.get("serves_verdict", {}).get(col)
        mark = "~" if warm and verdict == "at the edge" else "*" if warm and verdict == "no" else ""
        n = r.get("max_num_seqs", {}).get(col)
        lowered = f"@{n}" if n is not None and n != t.get("max_num_seqs") and (warm or cold) else ""
        return (fmt(warm) if warm == cold else f"{fmt(cold)} / {fmt(warm)}") + lowered + mark

    rows = [[f"{r['gmu']:.2f}"] + [cell(r, c) for c in cols] for r in t["rows"]]
    out = tabulate(rows, headers=["GMU"] + cols, tablefmt="simple", disable_numparse=True, stralign="right")
    if target is not None:
        def gm(col: str) -> str:
            w = target.get(col)
            f = (target_first or {}).get(col, w)
            s = lambda v: f"{v:.2f}" if v is not None else "none"  # noqa: E731
            return s(w) if f == w else f"{s(f)} / {s(w)}"

        out += "\n\n" + tabulate([[f"{tokens:,}"] + [gm(c) for c in cols]], headers=["smallest GMU for"] + cols,
                                 tablefmt="simple", disable_numparse=True, stralign="right")
    marks = {r.get("serves_verdict", {}).get(c) for r in t["rows"] for c in cols if r["ceilings"][c]}
    lowered = any(n != t.get("max_num_seqs") for r in t["rows"] for n in r.get("max_num_seqs", {}).values())
    return out + ("\n(ceiling = longest max_model_len that starts; graph columns: first boot after a change / "
                  "restart with the compile cache warm; '-' = does not start"
                  + (f"; @N = with --max-num-seqs N: vLLM's default {t.get('max_num_seqs')} exceeds the Mamba cache "
                     "blocks its CUDA graphs need (vLLM refuses it)" if lowered else "")
                  + ("; * = starts, but a prompt that long runs out of memory after startup" if "no" in marks else "")
                  + ("; ~ = serving a prompt that long is at the edge of the measured band" if "at the edge" in marks
                     else "")
                  + ("; `predict --gmu G` names the terms and the unknown that decides it" if marks & {"no", "at the edge"}
                     else "") + ")")


def activation_formula(d: Deployment, c: Coefficients | None = None) -> str:
    """How the profiled peak is built for this deployment (the budget's `activation`), in words; with the
    coefficients, the sort sampler's bytes per logit and whether a cold compile copies vocab x hidden."""
    copy = c is None or c.get("cold_compile_vocab_hidden_factor", 1.0) > 0
    per_token = c is not None and c.get("cold_compile_per_token_hidden_bytes", 0.0) > 0
    forward = "tokens x MLP width" + ("" if d.enforce_eager else
                                      " + warm compile" if d.compile_cache == "warm" else
                                      ", cold compile: vocab x hidden" + (" + tokens x hidden" if per_token else "")
                                      if copy else ", cold compile")
    if d.runner == "v2" and c is not None and "v2_sampler_bytes_per_logit" in c.items:
        sampler = f"sampler: rows x vocab x {c['v2_sampler_bytes_per_logit']:.1f} B (V2, two passes)"
        return f"max({forward}; {sampler})" if not d.with_vision else (
            f"max(vision encoder: {_tower_peak(d)}; max({forward}; {sampler}) + images held)")
    if d.rules.sampler == "sort":  # vLLM 0.10-0.16: top-k / top-p by a torch sort of every logit row
        per = f" x {c['sampler_sort_bytes_per_logit']:.0f} B" if c is not None else ""
        sampler = f"sort sampler: rows x vocab{per}"
    else:
        sampler = "rejection sampler x 2 rows" if d.spec_tokens else "sampler"
    lm = f"base + max({forward}; {sampler})"
    if d.with_vision:
        return f"max(vision encoder: {_tower_peak(d)}; {lm} + images held)"
    return lm


def _tower_peak(d: Deployment) -> str:
    return d.model.arch.vision.peak_text if d.model.arch.vision is not None else "none"


def kv_only_text(d: Deployment, available_kv_gib: float, res: dict[str, Any]) -> str:
    """`predict --available-kv-gib`: the KV plan as vLLM logs it."""
    pads = "; ".join(f"Add {n} padding layers, may waste at most {pct:.2f}%" for n, pct in res["padding_warnings"])
    return (f"KV plan for {available_kv_gib:.2f} GiB ({d.version_label}):\n"
            f"  block size {res['block_size']} tokens{'; ' + pads if pads else ''}\n"
            f"  {res['num_blocks']:,} blocks of {res['bytes_per_block']:,} bytes\n"
            f"  GPU KV cache size: {res['kv_cache_tokens']:,} tokens\n"
            f"  Maximum concurrency for {res['max_model_len']:,} tokens per request: {res['max_concurrency']:.2f}x\n"
            f"  ceiling (auto-fit max_model_len): {res['max_model_len_ceiling']:,}")


def explain_text(name: str, cmp: Any) -> str:
    """`explain`: the flags a log states, its budget next to predict's, and what its outcome means."""
    from ..comparison import meaning

    facts, d = cmp.facts, cmp.prediction.deployment
    i = d.inputs()
    spec = f"{d.speculative_method.upper()} {d.spec_tokens}" if d.spec_tokens else "no MTP"
    head = (f"{name}: vLLM {facts.vllm_version or '?'} | {i['model']} on {i['gpu']} | GMU {d.gmu:.2f} | "
            f"KV {d.kv_cache_dtype} | {'eager' if d.enforce_eager else 'graphs (' + d.compile_cache + ' compile)'}"
            f" | {spec} | seqs {d.max_num_seqs} | batched {d.max_num_batched_tokens}")
    if facts.wsl:
        head += f"\nunder WSL 2: the GPU's total taken as {d.gpu.total_gib:.2f} GiB ({d.gpu.source})"
    rows = [[t, "-" if lg is None else f"{lg:.2f}", f"{pr:.2f}", "" if e is None else f"{e:+.2f}"]
            for t, lg, pr, e in cmp.rows]
    table = tabulate(rows, headers=["term", "logged GiB", "predicted GiB", "difference"], tablefmt="simple",
                     disable_numparse=True)
    return f"{head}\n{table}\n{facts.outcome.upper()}: {meaning(cmp)}"


def partial_explain_text(name: str, j: dict[str, Any]) -> str:
    """`explain` on a cut or partial log: what it states, the lines it lacks and why no prediction is compared."""
    def show(v: Any) -> str:
        return f"{v:,}" if isinstance(v, int) and not isinstance(v, bool) else str(v)

    rows = [[k, show(v)] for k, v in j["stated"].items()]
    out = [f"{name}: a partial vLLM log ({j['outcome']}); no prediction to compare: {j['no_prediction']}",
           tabulate(rows, headers=["it states", "value"], tablefmt="simple", disable_numparse=True) if rows else
           "it states no figure"]
    if j["missing"]:
        out.append("missing: " + "; ".join(f"{m['line']} ({m['gives']})" for m in j["missing"]))
    out.append("Give what is missing (--model for the checkpoint, --gpu for the card) to compare its budget with "
               "predict's.")
    return "\n".join(out)


def probe_summary_text(s: dict[str, Any]) -> str:
    """`probe`: every startup in a table, then the ceiling (or smallest GMU) it found."""
    def length(a: dict[str, Any]) -> str:
        if a["max_model_len"] != -1:
            return f"{a['max_model_len']:,}"
        return f"auto -> {a['started_len']:,}" if a.get("started_len") else "auto"

    rows = [[a["n"], f"{a['gmu']:.2f}", length(a), a["outcome"], f"{a['seconds']:.0f}",
             {True: "ok", False: "FAILED", None: ""}[a["verify"]], a.get("why", "")] for a in s["attempts"]]
    out = [tabulate(rows, headers=["#", "GMU", "max_model_len", "outcome", "s", "verify", "why"], tablefmt="simple",
                    disable_numparse=True)]
    if s.get("max_num_seqs_asked") and s.get("max_num_seqs") != s["max_num_seqs_asked"]:
        out.append(f"max_num_seqs {s['max_num_seqs']} (not {s['max_num_seqs_asked']}): vLLM's Mamba-block check needs "
                   "a KV cache block for every sequence its CUDA graphs capture; start vLLM with "
                   f"--max-num-seqs {s['max_num_seqs']}")
    if s.get("failed"):
        out.append(f"probe stopped: {s['failed'].replace('_', ' ')} (logs and records: {s['records']})")
    elif s["mode"] == "bisect":
        ooms = s.get("runtime_oom_gmus") or []
        at = f" at GMU {s['gmu']:.2f}" if s.get("gmu") is not None else ""
        how = ""
        if s.get("strategy") == "auto-fit":
            how = (f" (vLLM's own fit with --max-model-len auto: {s['first_boot']:,} on the first boot, the ceiling "
                   "after a restart on the second, which loads the first's compiled graphs)"
                   if s.get("first_boot") and s["first_boot"] != s.get("fitted") else " (vLLM's own fit, "
                   "--max-model-len auto)")
        out.append(f"ceiling{at}: max_model_len {s['ceiling']:,} (predicted {s.get('predicted', 0):,}) "
                   f"in {s['startups']} startup{'s' if s['startups'] != 1 else ''}{how}; records: {s['records']}")
        if ooms:
            out.append("started but ran out of memory serving at GMU " + ", ".join(f"{g:.2f}" for g in ooms)
                       + " (a startup-only check would have certified it)")
    else:
        g = s.get("min_gmu")
        out.append(f"smallest GMU for {s['tokens']:,} tokens: {g:.2f}" if g else
                   f"no GMU up to 0.99 starts {s['tokens']:,} tokens")
    return "\n".join(out)


def workers_text(workers: list[dict]) -> str:
    """Every worker's own budget line of a log (explain), logged / predicted."""
    from tabulate import tabulate

    rows = [[w["worker"], w["rank"], w["layers"], f"{w['weights_logged_gib']:.2f} / {w['weights_predicted_gib']:.2f}",
             f"{w['activation_logged_gib']:.2f} / {w['activation_predicted_gib']:.2f}",
             f"{w['kv_logged_gib']:.2f} / {w['kv_predicted_gib']:.2f}", f"{w['kv_error_gib']:+.2f}",
             f"{w['kv_blocks']:,}"] for w in workers]
    return ("\nEvery worker's own budget line (logged / predicted, GiB); vLLM gives each the fewest blocks:\n"
            + tabulate(rows, headers=["worker", "rank", "layers", "weights", "activation", "KV", "KV error",
                                      "KV blocks"], tablefmt="simple", disable_numparse=True))
