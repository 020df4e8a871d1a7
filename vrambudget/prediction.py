"""Prediction = budget + KV plan + a verdict; the inverse (smallest GMU for a context) and the
ceiling table over GMU x graphs/eager x MTP on/off. Pure: no I/O, no printing."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

from .budget import Budget, budget, features, weight_bytes
from .hardware.catalog import Basis
from .hardware.facts import flashinfer_autotunes, gdn_prefill_path, unified_memory_band
from .runtime import RuntimeNeed, Verdict, eager_warmup_bytes, max_serving_gmu
from .serving import budget_error, graph_kind_band, graph_mode, host_share_term, runtime_for, start_verdict
from .start_checks import Check, StartCheck, mamba_check_applies, start_checks
from .coefficients import Coefficients
from .deployment import Defaulted, Deployment
from .model.arch import SLIDING
from .kv.planner import (DraftLayers, KVLayout, KVPlan, block_table_bytes, block_table_ceiling, build_layout, ceiling_for, stage_pool_layers,
                        kv_needed_bytes, plan_startup)
from .units import GiB, cdiv
from .model.weights import WeightBytes


def layout_for(d: Deployment) -> KVLayout:
    a = d.model.arch
    # FlashInfer's GDN prefill (Hopper's default) exports block-aligned state checkpoints in 'align' mode: blocks a
    # multiple of its alignment and one more state block a request (0.33 qwen_gdn_linear_attn.py); Triton's does not
    hopper_align = d.mamba_mode == "align" and gdn_prefill_path(d.gpu, d.gdn_prefill_backend).startswith("FlashInfer")
    mamba_blocks = 1 + d.spec_tokens
    if d.mamba_mode == "align":
        mamba_blocks = 2 + d.spec_tokens + (d.rules.align_hopper_extra_blocks if hopper_align else 0)
    if a.share is not None:  # a pipeline stage: the whole model's groups, projected onto its layers
        whole = replace(a, layers=a.share.whole_layers, share=None)
        lay = layout_for(d.with_(model=replace(d.model, arch=whole)))
        kinds = [layer.mixer.kind if layer.mixer is not None else None for layer in a.share.whole_layers]
        return replace(lay, pool_layers=stage_pool_layers(lay, kinds, a.share.first_layer, a.num_layers))
    return build_layout(
        a, kv_dtype_bytes=d.kv_dtype_bytes, spec_tokens=d.spec_tokens,
        draft_attention_layers=a.mtp_layers if d.mtp else 0, tp=d.tp, mamba_blocks=mamba_blocks,
        block_multiple=d.rules.align_block_multiple_hopper if hopper_align else d.rules.hybrid_block_multiple,
        max_num_batched_tokens=d.max_num_batched_tokens, in_flight_batches=d.rules.sliding_in_flight_batches,
        kv_scale_bytes=d.kv_scale_bytes, drafter=draft_layers(d), mla_block_size=d.mla_block_size,
        mla_fp8_ds=d.mla_fp8_ds)


def started_length(plan: KVPlan, d: Deployment) -> int:
    """The max_model_len vLLM starts with: the one asked for, or with auto-fit the ceiling below it (tokens)."""
    return plan.max_model_len if not d.auto_fit else min(plan.ceiling, plan.max_model_len)


def draft_layers(d: Deployment) -> tuple[DraftLayers, ...]:
    """An external drafter's KV-cache layers per rank, by kind, as this vLLM version builds them."""
    dr = d.drafter
    if dr is None or not d.spec_tokens:
        return ()
    kinds = dr.kinds(d.rules.drafter_sliding_layers)
    heads = max(1, dr.num_kv_heads // d.tp)
    return tuple(DraftLayers(k, kinds.count(k), heads, dr.head_dim, dr.sliding_window if k == SLIDING else None)
                 for k in dict.fromkeys(kinds))


@dataclass
class Prediction:
    deployment: Deployment
    budget: Budget
    plan: KVPlan
    starts: bool  # vLLM gets through startup with these flags
    reasons: list[str] = field(default_factory=list)  # why it does not start
    warnings: list[str] = field(default_factory=list)
    runtime: RuntimeNeed | None = None  # what serving the ceiling-length prompt needs beyond the budget
    max_serving_gmu: float | None = None  # highest GMU that leaves the runtime need unbudgeted
    estimated: list[str] = field(default_factory=list)  # terms not measured on this GPU / version
    coefficients: Coefficients | None = field(default=None, repr=False)  # what the verdicts' spreads come from
    checks: list[StartCheck] = field(default_factory=list)  # vLLM's start checks that apply, passing or not
    table_ceiling: int | None = None  # the longest max_model_len whose block tables fit outside the budget

    @property
    def refusals(self) -> list[StartCheck]:
        """The start checks vLLM fails with these flags at any max_model_len (the KV-too-small check is per length)."""
        return [c for c in self.checks if not c.passes]

    @cached_property
    def verdicts(self) -> dict[str, Verdict]:
        """yes / at the edge / no with margins and bands: "starts", "first request", "prompt" (none where no KV
        memory is left)."""
        b, layout, d, c = self.budget, self.plan.layout, self.deployment, self.coefficients
        if b.available_kv_bytes <= 0 or c is None or self.runtime is None:
            return {}
        length = started_length(self.plan, d)
        need_kv = kv_needed_bytes(layout, max(1, length), d.rules)
        if any(c.check is Check.MAMBA_CACHE_BLOCKS for c in self.checks):  # max_num_seqs blocks, whatever the length
            need_kv = max(need_kv, d.max_num_seqs * layout.bytes_per_block)
        return {"starts": start_verdict(f"max_model_len {length:,} starts", b.available_kv_bytes, need_kv, c, b, d),
                "first request": self.runtime.verdict("first"), "prompt": self.runtime.verdict("prompt")}

    @cached_property
    def ceiling_band(self) -> tuple[int, int] | None:
        """The ceiling at the low and high end of the activation peak's measured spread and, on unified memory, of
        the host's share that public boots lost (tokens)."""
        b, d, c = self.budget, self.deployment, self.coefficients
        if b.available_kv_bytes <= 0 or c is None:
            return None
        err = budget_error(c, d, b)  # a larger true peak (or graph estimate) leaves less KV memory
        host = host_share_term(d)
        cap = d.model.arch.max_position_embeddings
        low_kv = b.available_kv_bytes - int(err.high) - (host.high if host else 0)
        return (min(cap, ceiling_for(self.plan.layout, max(0, low_kv), d.rules)),
                min(cap, ceiling_for(self.plan.layout, b.available_kv_bytes - int(err.low), d.rules)))

    @property
    def ceiling(self) -> int:
        """Longest max_model_len that starts: the KV ceiling, capped at the model's own maximum; 0 where a start
        check refuses these flags at any length."""
        if self.refusals:
            return 0
        return min(self.plan.ceiling, self.deployment.model.arch.max_position_embeddings,
                   self.table_ceiling if self.table_ceiling is not None else self.plan.ceiling)

    @property
    def max_model_len(self) -> int:
        """The max_model_len vLLM ends up with (auto-fit lowers it to the ceiling)."""
        return self.plan.max_model_len

    def to_json(self) -> dict[str, Any]:
        b, p = self.budget, self.plan
        return {
            "requested_bytes": b.requested_bytes, "weights_bytes": b.weights_bytes,
            "mtp_weights_bytes": b.mtp_weights_bytes, "activation_bytes": b.activation_bytes,
            "non_torch_bytes": b.non_torch_bytes, "cudagraph_bytes": b.cudagraph_bytes,
            "cudagraph_in_budget": b.cudagraph_in_budget, "num_cudagraphs": b.num_cudagraphs,
            "runner_buffers_bytes": b.runner_buffers_bytes, "model_runner": self.deployment.runner,
            "non_kv_bytes": b.non_kv_bytes, "available_kv_bytes": b.available_kv_bytes,
            "cuda_context_bytes": b.cuda_context_bytes, "cuda_context_measured": b.cuda_context.measured,
            "cuda_context_source": b.cuda_context.source, "free_at_start_bytes": b.free_at_start_bytes,
            "runtime_margin_bytes": b.runtime_margin_bytes, "weights_source": b.weights_source,
            "attention_backend": b.backend.label, "attention_backend_workspace_bytes": b.backend.profiled_bytes,
            "gdn_prefill_path": gdn_prefill_path(self.deployment.gpu, self.deployment.gdn_prefill_backend) if self.deployment.model.arch.gdn else None,
            "runtime": None if self.runtime is None else {
                "prompt_tokens": self.runtime.prompt_tokens, "need_bytes": self.runtime.need_bytes,
                "margin_bytes": self.runtime.margin_bytes, "serves": self.runtime.serves,
                "terms": [{"name": t.name, "bytes": t.bytes, "source": t.source, "measured": t.measured,
                           "stage": t.stage, "spread_bytes": [t.low, t.high]} for t in self.runtime.terms],
                "held_after_startup": [{"name": t.name, "bytes": t.bytes, "source": t.source, "measured": t.measured,
                                        "spread_bytes": [t.low, t.high]} for t in self.runtime.held]},
            "max_serving_gmu": self.max_serving_gmu, "estimated_terms": self.estimated,
            "verdicts": {k: v.to_json() for k, v in self.verdicts.items()},
            "max_model_len_ceiling_band": list(self.ceiling_band) if self.ceiling_band else None,
            "block_size": p.layout.block_size, "group_size": p.layout.group_size,
            "num_kv_groups": p.layout.num_groups, "padding_layers": p.layout.padding_layers,
            "padding_warnings": p.layout.padding_warnings, "bytes_per_block": p.layout.bytes_per_block,
            "num_blocks": p.num_blocks, "blocks_per_request": p.blocks_per_request,
            "max_model_len": p.max_model_len, "kv_cache_tokens": p.kv_cache_tokens,
            "max_concurrency": round(p.max_concurrency, 4), "max_model_len_ceiling": self.ceiling,
            "kv_ceiling_tokens": p.ceiling,
            "fits": self.starts, "reasons": self.reasons, "warnings": self.warnings,
            "start_checks": [c.to_json() for c in self.checks],
            "inputs": self.deployment.inputs(),
        }


def _gib(n: float) -> str:
    return f"{n / GiB:.2f} GiB"


def min_gmu_for_bytes(d: Deployment, non_kv: int, kv_needed: int) -> float | None:
    """Smallest GMU (0.01 steps) whose budget leaves `kv_needed` bytes after `non_kv`, and that
    still passes the free-memory check; None if even 1.00 does not."""
    g = math.ceil((non_kv + kv_needed) / d.gpu.total_bytes * 100 - 1e-9) / 100
    while g <= 1.0 + 1e-9:
        if math.ceil(d.gpu.total_bytes * g) - non_kv >= kv_needed:
            return round(g, 2)
        g = round(g + 0.01, 2)
    return None


def free_memory_check(d: Deployment, b: Budget) -> StartCheck:
    """vLLM's first check (v1/worker/utils.py, 0.20-0.33: the free memory at its first snapshot against
    ceil(total x GMU)), failing: the message it prints with the predicted figures, and the GMU that passes."""
    g = max_gmu_for_free(d, b)
    message = (f"Free memory on device ({b.free_at_start_bytes / GiB:.2f}/{d.gpu.total_gib:.2f} GiB) on startup is "
               f"less than desired GPU memory utilization ({d.gmu}, {b.requested_bytes / GiB:.2f} GiB). Decrease GPU "
               "memory utilization or reduce GPU memory used by other processes.")
    return StartCheck(Check.FREE_MEMORY_BELOW_BUDGET, False, b.requested_bytes, b.free_at_start_bytes, message,
                      f"--gpu-memory-utilization {g:.2f} or lower (the CUDA context and other processes sit outside "
                      "the budget), or free the GPU", "vllm/v1/worker/utils.py request_memory (0.20.2-0.33.0)")


def max_gmu_for_free(d: Deployment, b: Budget) -> float:
    """Largest GMU (0.01 steps) that the free memory at start allows."""
    return math.floor(b.free_at_start_bytes / d.gpu.total_bytes * 100) / 100


def estimated_terms(d: Deployment, b: Budget, c: Coefficients | None = None) -> list[str]:
    """The figures of this prediction that nobody measured on this GPU/version (said in every output)."""
    out = []
    if (d.tp > 1 or d.pp > 1) and c is not None and "non_torch_eager_tp_bytes" not in c.items:
        out.append("non-torch memory of a worker of several on this vLLM (measured on 0.26.0 only: 0.06-0.09 GiB; "
                   "a public vLLM 0.10.2 TP=2 boot on two H200s logged 1.38 GiB per worker)")
    if d.nodes > 1:
        out.append(f"{d.nodes} hosts: every worker is planned as on one host (NCCL's buffers for the network between "
                   "hosts are not measured)")
    if d.pp > 1 and len({lay.kind for lay in d.model.arch.layers if lay.mixer is not None}) > 1:
        out.append("the KV groups of a hybrid or sliding-window model's pipeline stages (vLLM 0.26.0's source: the "
                   "whole model's groups projected onto each stage; no multi-GPU log of one measured)")
    if d.pp > 1:
        out.append("pipeline stages (measured on vLLM 0.26.0, two H200s: Qwen3-8B, Llama-3.1-8B, Qwen3-30B-A3B; the "
                   "intermediate tensors on other versions and runners from source)")
    if not d.gpu.measured:
        public = f"{d.gpu.source.split(' ', 1)[0]} public figure" if d.gpu.basis is Basis.PUBLISHED else None
        out.append(f"GPU total ({public or d.gpu.source.split(':')[0]})")
    if d.gpu.unified_memory:
        out.append(f"{d.gpu.name} shares its memory with the CPU: vLLM reads the host's available memory, so what the "
                   "host's processes allocate during the profile (the compilers' heap on a cold boot) counts as its "
                   f"non-torch memory, not modelled: public cold boots lost {unified_memory_band()} "
                   "of KV memory to it (gpu_facts.json unified_memory)")
    if not b.cuda_context.measured:
        ctx = b.cuda_context
        out.append(f"CUDA context ({ctx.kind or 'estimate'}, {ctx.low / GiB:+.2f} to {ctx.high / GiB:+.2f} GiB)")
    if b.backend.name != "FLASH_ATTN":
        out.append(f"{b.backend.label} backend (picked from vLLM source; its cost measured on an H100)")
    if d.gpu.key not in ("h100", "h200"):
        out.append("activation/non-torch/graph coefficients and what vLLM keeps after startup (fitted on H100/H200)")
    if d.vllm is not None and not d.vllm.measured:
        out.append(d.vllm.label)
    elif d.vllm is None and not d.rules.measured:
        out.append(f"vLLM {d.rules.version} coefficients (inherited from measured ranges, not measured)")
    if d.lora is not None:
        out.append(f"LoRA: {d.lora_left_out}: its slots are left out of the budget" if d.lora_left_out else
                   f"LoRA slots ({d.lora.max_loras} x rank {d.lora.max_rank}: shapes from vLLM 0.22.1's source, "
                   "loaded as weights; the kernels' per-token buffers not measured)")
    if d.drafter is not None and d.spec_tokens:
        out.append(f"DFlash drafter {d.drafter.name}: weights from its config (one vLLM 0.26.0 startup: within "
                   "0.05 GiB), its CUDA graphs not measured (KV layers checked on vLLM 0.20 and 0.26.0 logs)")
    band = graph_kind_band(c, d, b) if c is not None and b.cudagraph_in_budget and b.cudagraph_bytes else None
    if band is not None and band.source:
        out.append(f"CUDA-graph estimate of this kind of model on Model Runner V2 ({band.source}: "
                   f"{-band.high / GiB:+.2f} to {-band.low / GiB:+.2f} GiB of KV memory here)")
    if d.with_vision and d.model.arch.vision is not None:
        out.append(d.model.arch.vision.evidence)
    return out


def predict(d: Deployment, c: Coefficients, w: WeightBytes | None = None,
            prompt_tokens: int | None = None) -> Prediction:
    """Budget, KV plan and verdict; `prompt_tokens` (default: the ceiling) is the prompt whose
    runtime needs are checked against the memory left outside the budget."""
    w = w or weight_bytes(d)
    f = features(d, w)
    b = budget(d, c, w, f)
    layout = layout_for(d)
    avail = b.available_kv_bytes
    plan = plan_startup(layout, avail, d.max_model_len, d.auto_fit, d.rules)
    warnings: list[str] = []
    certain_short = _free_memory_short(d, b, warnings)
    reasons = _kv_reasons(d, b, plan, layout)
    table_ceiling, tables_reason = _block_tables(d, c, b, f, plan, layout)
    if tables_reason:
        reasons.append(tables_reason)
    checks = [_with_fix(chk, d, c, w) for chk in start_checks(d, plan, graph_mode(d, b))]
    if not b.startup_memory_ok and certain_short:
        checks.append(free_memory_check(d, b))
    reasons[:0] = [chk.text for chk in checks if not chk.passes]  # vLLM refuses these at any length: first
    autotune = d.enforce_eager and flashinfer_autotunes(d.gpu).value  # a full-size forward after the KV cache
    warm_up = eager_warmup_bytes(d.model.arch.mlp_width, d.max_num_batched_tokens, d.tp) if autotune else 0
    if avail > 0 and not reasons and b.runtime_margin_bytes < warm_up:
        warnings.append(f"may fail right after the KV cache is allocated: eager kernel warmup re-runs a "
                        f"{d.max_num_batched_tokens:,}-token forward and needs ~{_gib(warm_up)} outside the budget "
                        f"(estimate from H100 lab startups), {_gib(b.runtime_margin_bytes)} is left there: "
                        f"lower --gpu-memory-utilization to {max_serving_gmu(d.gpu.total_bytes, b.free_at_start_bytes, warm_up) or 0:.2f}")
    ceiling = min(plan.ceiling, d.model.arch.max_position_embeddings)
    rt = runtime_for(d, c, b, layout, prompt_tokens or max(1, min(ceiling, plan.max_model_len) or 1), f)
    if prompt_tokens:
        rt = replace(rt, max_model_len=started_length(plan, d))
    serve_gmu = max_serving_gmu(d.gpu.total_bytes, b.free_at_start_bytes, rt.need_bytes)
    if avail > 0 and not rt.serves:
        terms_txt = " + ".join(f"{t.name} {_gib(t.bytes)}" for t in rt.terms if t.bytes)
        warnings.append(f"starts but may not serve: a {rt.prompt_tokens:,}-token prompt needs ~{_gib(rt.need_bytes)} "
                        f"outside the budget ({terms_txt}), only {_gib(rt.margin_bytes)} is left there: "
                        + (f"the highest GMU that serves it is {serve_gmu:.2f}" if serve_gmu else
                           "no GMU leaves enough; lower --max-num-batched-tokens"))
    warnings += _version_and_model_warnings(d, c, plan, layout, reasons)
    return Prediction(d, b, plan, starts=not reasons, reasons=reasons, warnings=warnings, runtime=rt,
                      max_serving_gmu=serve_gmu, estimated=estimated_terms(d, b, c), coefficients=c, checks=checks,
                      table_ceiling=table_ceiling)


def _free_memory_short(d: Deployment, b: Budget, warnings: list[str]) -> bool:
    """Whether the free memory at start is certainly below the budget (vLLM refuses to start); where it only may
    be (the CUDA context is an estimate), a warning says so."""
    if b.startup_memory_ok:
        return False
    short = b.requested_bytes - b.free_at_start_bytes
    # certain where the free memory was measured, where even no context would not leave the budget, or where
    # the context estimate's own spread (how much smaller it may be) cannot make up the shortfall
    smaller_by = -(b.cuda_context.low or 0) if b.cuda_context.low is not None else None
    certain = (b.free_at_start_measured or d.gpu.total_bytes - d.other_gpu_bytes - d.gpu.used_bytes < b.requested_bytes
               or (smaller_by is not None and short > smaller_by))
    if not certain:
        text = (f"free memory at start ({_gib(b.free_at_start_bytes)} of {_gib(d.gpu.total_bytes)}, after a "
                f"{'measured' if b.cuda_context.measured else 'estimated'} CUDA context of {_gib(b.cuda_context_bytes)}) "
                f"is {_gib(short)} less than the GMU {d.gmu:.2f} budget ({_gib(b.requested_bytes)})")
        warnings.append(f"{text}; the context is an estimate ({b.cuda_context.source.split(';')[0]}), so vLLM may "
                        f"still start if it is {_gib(short)} smaller: check with --gpu auto on the card, or lower "
                        f"--gpu-memory-utilization to {max_gmu_for_free(d, b):.2f} to be sure")
    return bool(certain)


def _tower_hint(d: Deployment) -> str:
    """With a vision tower loaded: what lowers its share (its weights and the encoder profile vLLM runs with it)."""
    v = d.model.arch.vision
    if not d.with_vision or v is None:
        return ""
    item = v.profiled_modality
    other = (f"--limit-mm-per-prompt '{{\"{item}\": 0}}' profiles another item instead; "
             if item not in d.mm_off and v.profiles_without(frozenset({item})) else "")
    return (f" (the {v.name} tower's weights and its {item} profile are part of it: {other}--language-model-only "
            "drops the tower)")


def _kv_reasons(d: Deployment, b: Budget, plan: KVPlan, layout: KVLayout) -> list[str]:
    """Why the KV cache does not hold what the flags ask: no memory left, not one token, or max_model_len."""
    avail = b.available_kv_bytes
    if avail <= 0:
        return [f"weights and activations need {_gib(b.non_kv_bytes)}, the GMU {d.gmu:.2f} budget is "
                f"{_gib(b.requested_bytes)}: over by {_gib(-avail)}, no memory left for the KV cache{_tower_hint(d)}"]
    if plan.ceiling == 0:
        need = kv_needed_bytes(layout, 1, d.rules)
        return [f"not even one token fits: one request needs {_gib(need)} of KV cache, {_gib(avail)} is available"
                f"{_tower_hint(d)}"]
    if not d.auto_fit and plan.ceiling < d.max_model_len:
        need = kv_needed_bytes(layout, d.max_model_len, d.rules)
        g = min_gmu_for_bytes(d, b.non_kv_bytes, need)
        hint = f"raise GMU to {g:.2f}" if g else "even GMU 1.00 is not enough"
        what = "max_model_len" if d.max_model_len_given else "vLLM's default max_model_len (the model's maximum)"
        return [f"{what} {d.max_model_len:,} needs {_gib(need)} of KV cache, {_gib(avail)} is "
                f"available: the ceiling at GMU {d.gmu:.2f} is {plan.ceiling:,}; {hint}, "
                f"or pass --max-model-len {plan.ceiling} (or auto)"]
    return []


def _block_tables(d: Deployment, c: Coefficients, b: Budget, f, plan: KVPlan, layout: KVLayout) -> tuple[int, str]:
    """(the longest context whose block tables fit, why this one does not: '' where it does). The block tables are
    allocated after the profile, beside the KV cache: outside the budget, with the profiled peak released (vLLM
    0.26.0, lab families/llama4-e: 4 groups x 1024 seqs x 655,360 blocks, 10 GiB, OOMed there)."""
    kept = max(f.moe_workspace_bytes, 0) + int(c.get("kv_allocation_held_bytes", 0.0))
    room = b.free_at_start_bytes - b.requested_bytes + b.activation_bytes - kept
    table_ceiling = block_table_ceiling(layout, d.max_num_seqs, room)
    length = started_length(plan, d)
    if b.available_kv_bytes <= 0 or length <= table_ceiling:
        return table_ceiling, ""
    tables = block_table_bytes(layout, d.max_num_seqs, max(1, length))
    return table_ceiling, (
        f"vLLM's block tables ({layout.num_groups} KV group(s) x {d.max_num_seqs} seqs x "
        f"{cdiv(length, layout.block_size):,} blocks a request of {length:,} tokens, int32) take "
        f"{_gib(tables)} beside the KV cache, where {_gib(max(0, room))} is free (outside the budget "
        f"and the profile peak released, less what the runner keeps): allocating the KV cache runs out of memory; pass "
        f"--max-model-len {table_ceiling} or fewer --max-num-seqs")


def _version_and_model_warnings(d: Deployment, c: Coefficients, plan: KVPlan, layout: KVLayout,
                                reasons: list[str]) -> list[str]:
    """What this vLLM and this model warn of beside the answer: the version's own notes, ngram on a hybrid, a fresh
    machine's JIT, a cold compile cache, a length within one block of the ceiling."""
    warnings = list(d.vllm.warnings) if d.vllm is not None else []
    warnings.extend(note for prefix, note in d.rules.model_notes if d.model.arch.model_type.startswith(prefix))
    if d.spec_tokens and d.speculative_method == "ngram" and d.model.arch.is_hybrid:
        warnings.append("ngram speculative decoding on a GDN hybrid: rejected draft tokens corrupt the recurrent "
                        "state; use MTP instead (--mtp 2)")
    jit = c.get("fresh_jit_extra_bytes", 0.0)
    if d.enforce_eager and d.model.arch.is_hybrid and jit and d.compile_cache != "fresh":
        warnings.append(f"the first boot on a new machine or after an upgrade JIT-compiles the GDN Triton kernels "
                        f"inside vLLM's profile: about {_gib(jit)} more peak (measured once); --compile-cache fresh "
                        "plans that boot")
    if not d.enforce_eager and d.compile_cache in ("cold", "fresh"):
        key = (" (in this vLLM a new max_model_len is a new compile-cache key, so each new length boots cold "
               "once)") if d.rules.compile_key_has_max_model_len else ""
        warnings.append("cold torch.compile cache: the first boot profiles a larger peak; a second boot "
                        f"(--compile-cache warm) gets more KV cache{key}")
    if plan.ceiling and 0 <= plan.ceiling - plan.max_model_len < layout.block_size and not d.auto_fit and not reasons:
        warnings.append(f"max_model_len is within one block ({layout.block_size} tokens) of the ceiling")
    return warnings


def _with_fix(chk: StartCheck, d: Deployment, c: Coefficients, w: WeightBytes) -> StartCheck:
    """A failing Mamba-block check with the max_num_seqs that starts (mamba_safe_max_num_seqs) in its fix."""
    if chk.passes or chk.check is not Check.MAMBA_CACHE_BLOCKS:
        return chk
    seqs = mamba_safe_max_num_seqs(d, c, w)
    fix = (f"--max-num-seqs {seqs} (the most whose own budget still leaves that many KV cache blocks with the "
           f"activation peak at the top of its measured spread) or --enforce-eager; a higher --gpu-memory-utilization adds blocks, a shorter "
           "max_model_len does not" if seqs else
           "--enforce-eager (no max_num_seqs leaves enough blocks for CUDA graphs), or a higher "
           "--gpu-memory-utilization")
    return replace(chk, fix=fix, max_num_seqs_that_starts=seqs or None)


def mamba_safe_max_num_seqs(d: Deployment, c: Coefficients, w: WeightBytes | None = None) -> int:
    """The largest max_num_seqs (at most the deployment's) whose own budget (the sampler's rows and the captured
    graphs shrink with it) leaves at least that many KV cache blocks at the high end of the activation peak's
    measured spread, so that vLLM's Mamba-block check passes; 0 where not even 1 does."""
    w = w or weight_bytes(d)
    bpb = layout_for(d).bytes_per_block

    def holds(seqs: int) -> bool:
        dd = d.with_(max_num_seqs=seqs)
        b = budget(dd, c, w)
        avail = b.available_kv_bytes - int(budget_error(c, dd, b).high)
        return avail > 0 and avail // bpb >= seqs

    lo, hi = 0, d.max_num_seqs
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if holds(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def seqs_that_start(predictions: list[Prediction]) -> int | None:
    """The max_num_seqs that passes vLLM's Mamba-block check on each of these boots of one deployment (the fix its
    refusals name, the smallest); None where none refuses or one has no max_num_seqs that starts."""
    seqs = [chk.max_num_seqs_that_starts for p in predictions for chk in p.refusals if chk.check is Check.MAMBA_CACHE_BLOCKS]
    return min(seqs) if seqs and all(seqs) else None


def fit_max_num_seqs(d: Deployment, c: Coefficients, w: WeightBytes | None = None) -> Deployment:
    """Where the user left max_num_seqs to vLLM and vLLM's Mamba-block check would refuse its default with CUDA
    graphs, the deployment with the largest max_num_seqs that starts (mamba_safe_max_num_seqs), said in its
    defaults; otherwise the deployment unchanged."""
    if d.max_num_seqs_given or d.enforce_eager:
        return d
    p = predict(d, c, w)
    seqs = seqs_that_start([p])
    if seqs is None:
        return d
    limit = next(x.limit for x in p.refusals if x.check is Check.MAMBA_CACHE_BLOCKS)
    note = (f"max_num_seqs {seqs} (chosen: vLLM's default {d.max_num_seqs} exceeds the {limit} Mamba cache blocks "
            "its CUDA graphs need)")
    defaults = tuple(Defaulted("max_num_seqs", note) if x.flag == "max_num_seqs" else x for x in d.defaults)
    return d.with_(max_num_seqs=seqs, defaults=defaults)


def kv_only(d: Deployment, available_kv_gib: float) -> dict[str, Any]:
    """vLLM's KV plan for a given available KV memory (GiB, as a log's 'Available KV cache memory' states it),
    skipping the budget: block size, padding, blocks, KV cache tokens, concurrency and the auto-fit ceiling."""
    from .errors import UserError

    if not 0 < available_kv_gib <= 1 << 20:  # also NaN and infinity
        raise UserError(f"--available-kv-gib must be a positive size in GiB (as a log's 'Available KV cache "
                        f"memory' line gives it), got {available_kv_gib}")
    lay = layout_for(d)
    avail = int(round(available_kv_gib * GiB))
    p = plan_startup(lay, avail, d.max_model_len, d.auto_fit, d.rules)
    return {"available_kv_bytes": avail, "block_size": lay.block_size, "padding_layers": lay.padding_layers,
            "padding_warnings": lay.padding_warnings, "num_blocks": p.num_blocks,
            "bytes_per_block": lay.bytes_per_block, "max_model_len": p.max_model_len,
            "kv_cache_tokens": p.kv_cache_tokens, "max_concurrency": round(p.max_concurrency, 4),
            "max_model_len_ceiling": p.ceiling, "inputs": d.inputs()}


def variants(d: Deployment, c: Coefficients) -> list[tuple[str, Prediction]]:
    """This deployment as graphs / eager x MTP off / on (the table's columns), for pictures side by side."""
    return [(col.label, predict(d.with_(enforce_eager=col.enforce_eager, spec_tokens=col.spec_tokens,
                                        speculative_method="mtp"), c))
            for col in table_columns(d, d.spec_tokens or 2)]


def cannot_start_at_all(p: Prediction) -> bool:
    """True when no max_model_len starts (as opposed to only the asked-for one being too long)."""
    return not p.starts and (p.plan.ceiling == 0 or bool(p.refusals) or not p.budget.startup_memory_ok
                             or p.budget.available_kv_bytes <= 0 or p.deployment.max_model_len_given)


def min_gmu_for_context(d: Deployment, c: Coefficients, tokens: int, w: WeightBytes | None = None) -> float | None:
    """Smallest GMU (to 0.01) at which a max_model_len of `tokens` starts; None if none does."""
    w = w or weight_bytes(d)
    d = d.with_(max_model_len=tokens, auto_fit=False)
    b = budget(d, c, w)
    layout = layout_for(d)
    need = kv_needed_bytes(layout, tokens, d.rules)
    if mamba_check_applies(d, layout.hybrid, graph_mode(d, b)):  # a given max_num_seqs needs that many blocks (a default one is lowered)
        need = max(need, (d.max_num_seqs if d.max_num_seqs_given else 1) * layout.bytes_per_block)
    g = min_gmu_for_bytes(d, b.non_kv_bytes, need)
    if g is None:
        return None
    if g > max_gmu_for_free(d, b):
        return None
    return g


@dataclass(frozen=True)
class Column:
    label: str
    enforce_eager: bool
    spec_tokens: int


def table_columns(d: Deployment, mtp_tokens: int) -> list[Column]:
    cols = [Column("graphs", False, 0), Column("eager", True, 0)]
    if d.model.arch.mtp_layers:
        cols += [Column(f"graphs+MTP{mtp_tokens}", False, mtp_tokens), Column(f"eager+MTP{mtp_tokens}", True, mtp_tokens)]
    return cols


def ceiling_table(d: Deployment, c: Coefficients, gmus: list[float], mtp_tokens: int = 2) -> dict[str, Any]:
    """Ceilings (max_model_len that starts; 0 = does not start) per GMU x column."""
    w = weight_bytes(d)
    cols = table_columns(d, mtp_tokens)
    rows = []
    for g in gmus:
        cells, first, serves, verdicts, seqs = {}, {}, {}, {}, {}
        for col in cols:
            dd = d.with_(gmu=g, enforce_eager=col.enforce_eager, spec_tokens=col.spec_tokens, auto_fit=True)
            a = answer(dd, c, w, other=False, fix=not d.max_num_seqs_given)
            a = a.fixed or a  # vLLM's default max_num_seqs lowered where its Mamba-block check refuses it
            cells[col.label] = a.restart.ceiling if a.restart.starts else 0
            first[col.label] = a.first_boot.ceiling if a.first_boot.starts else 0
            serves[col.label] = bool(a.restart.starts and a.restart.runtime.serves)
            v = a.restart.verdicts.get("prompt")
            verdicts[col.label] = v.answer if v is not None and a.restart.starts else None
            seqs[col.label] = a.restart.deployment.max_num_seqs
        rows.append({"gmu": g, "ceilings": cells, "ceilings_first_boot": first, "serves": serves,
                     "serves_verdict": verdicts, "max_num_seqs": seqs})
    return {"columns": [col.label for col in cols], "rows": rows, "max_num_seqs": d.max_num_seqs,
            "about": "ceilings: after a restart (compile cache warm); ceilings_first_boot: the first boot after a "
                     "change (cold torch.compile); eager columns are the same on both; serves: a prompt of the "
                     "ceiling's length is predicted to fit in the memory left outside the budget; serves_verdict: "
                     "yes / at the edge / no with the measured band (predict names the unknown that decides it); "
                     "max_num_seqs: the cell's, lowered from vLLM's default where its Mamba-block check (CUDA graphs "
                     "on a hybrid) refuses it"}


def target_row(d: Deployment, c: Coefficients, tokens: int, mtp_tokens: int = 2,
               compile_cache: str = "warm") -> dict[str, float | None]:
    """Smallest GMU per column at which `tokens` start (graph columns: on a `compile_cache` boot)."""
    w = weight_bytes(d)
    return {col.label: min_gmu_for_context(d.with_(enforce_eager=col.enforce_eager, spec_tokens=col.spec_tokens,
                                                   compile_cache=compile_cache), c, tokens, w)
            for col in table_columns(d, mtp_tokens)}


@dataclass(frozen=True)
class Answer:
    """The headline: the ceiling on a first boot (cold torch.compile, or a machine's first: fresh) and after a
    restart (the compile cache warm, or warm-jit where the Triton cache is not kept), and whether the asked-for
    length starts and serves on each. In eager mode both boots are the same. `restart_other`: graphs only, the
    restart in the other Triton-cache state."""

    first_boot: Prediction
    restart: Prediction
    restart_other: Prediction | None = None
    fixed: "Answer | None" = None  # where a start check refuses these flags: the same with the fix it names

    @property
    def same(self) -> bool:
        return self.first_boot.deployment.enforce_eager

    @property
    def asked(self) -> Prediction:
        """The boot the deployment's --compile-cache names: the first (cold, fresh) or the restart (warm, warm-jit)."""
        return self.first_boot if self.first_boot.deployment.compile_cache in ("cold", "fresh") else self.restart

    @property
    def refusals(self) -> list[StartCheck]:
        """The start checks that refuse these flags on either boot, once per check (the first boot's where both)."""
        seen: dict[str, StartCheck] = {}
        for chk in self.first_boot.refusals + self.restart.refusals:
            seen.setdefault(chk.check, chk)
        return list(seen.values())


def answer(d: Deployment, c: Coefficients, w: WeightBytes | None = None, prompt_tokens: int | None = None,
           other: bool = True, fix: bool = True) -> Answer:
    """The first boot and the restart (and, with `other` in graph mode, the restart in the other Triton-cache
    state); where vLLM's Mamba-block check refuses max_num_seqs, with `fix` the same answer at the max_num_seqs that
    starts on both boots."""
    w = w or weight_bytes(d)
    if d.enforce_eager:
        p = predict(d, c, w, prompt_tokens)
        a = Answer(p, p)
    else:
        first = "fresh" if d.compile_cache == "fresh" else "cold"
        again = "warm-jit" if d.compile_cache == "warm-jit" else "warm"
        a = Answer(predict(d.with_(compile_cache=first), c, w, prompt_tokens),
                   predict(d.with_(compile_cache=again), c, w, prompt_tokens),
                   predict(d.with_(compile_cache="warm" if again == "warm-jit" else "warm-jit"), c, w, prompt_tokens)
                   if other else None)
    seqs = seqs_that_start([a.first_boot, a.restart])
    short = next((chk for p in (a.first_boot, a.restart) for chk in p.refusals
                  if chk.check is Check.FREE_MEMORY_BELOW_BUDGET), None)
    if fix and short is not None:  # vLLM refuses the budget itself: the same at the GMU the free memory allows
        g = max_gmu_for_free(d, a.restart.budget)
        if g >= 0.01:
            fixed_d = d.with_(gmu=g, defaults=tuple(x for x in d.defaults if x.flag != "gpu_memory_utilization") +
                              (Defaulted("gpu_memory_utilization", f"GMU {g:.2f} (the fix)"),))
            a = replace(a, fixed=answer(fixed_d, c, w, prompt_tokens, other, fix=True))
    elif fix and seqs is not None:
        note = f"max_num_seqs {seqs} (the fix)"
        fixed_d = d.with_(max_num_seqs=seqs, max_num_seqs_given=True,
                          defaults=tuple(x for x in d.defaults if x.flag != "max_num_seqs")
                          + (Defaulted("max_num_seqs", note),))
        a = replace(a, fixed=answer(fixed_d, c, w, prompt_tokens, other, fix=False))
    return a


def predict_json(a: Answer) -> dict[str, Any]:
    """`predict --json` for one budget: the asked boot's prediction and the headline's keys."""
    return {**a.asked.to_json(), **answer_json(a)}


def answer_json(a: Answer) -> dict[str, Any]:
    """The headline's keys in --json (added to the prediction's own)."""
    out = {"max_model_len_ceiling_first_boot": a.first_boot.ceiling if a.first_boot.plan.ceiling else 0,
           "max_model_len_ceiling_restart": a.restart.ceiling if a.restart.plan.ceiling else 0,
           "starts_first_boot": a.first_boot.starts, "starts_restart": a.restart.starts,
           "defaults_not_chosen": [x.text for x in a.restart.deployment.defaults],
           "verdicts_first_boot": {k: v.to_json() for k, v in a.first_boot.verdicts.items()},
           "verdicts_restart": {k: v.to_json() for k, v in a.restart.verdicts.items()},
           "restart_compile_cache": a.restart.deployment.compile_cache,
           "start_refusals": [chk.to_json() for chk in a.refusals]}
    if a.fixed is not None:
        out["with_fix"] = {"max_num_seqs": a.fixed.restart.deployment.max_num_seqs,
                           "gpu_memory_utilization": a.fixed.restart.deployment.gmu,
                           **{k: v for k, v in answer_json(a.fixed).items() if k not in ("defaults_not_chosen",)}}
    if a.restart_other is not None:
        o = a.restart_other
        out["max_model_len_ceiling_restart_" + o.deployment.compile_cache.replace("-", "_")] = \
            o.ceiling if o.plan.ceiling else 0
    return out
