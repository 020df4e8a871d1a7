"""Everything that differs between vLLM versions, in one place, keyed by version.

Each `VllmRules` states how one version range plans the KV cache, what it logs and its defaults.
Sources: vLLM 0.20.2 real startup logs (shared fixtures, verified) and the 0.20.2 / 0.33.0 wheels'
source (`v1/core/kv_cache_utils.py`, `platforms/interface.py`, `v1/worker/gpu_worker.py`,
`engine/arg_utils.py`), as summarised in the project's memory-model spec.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .errors import UserError, shown


@dataclass(frozen=True)
class VllmRules:
    version: str  # the range's canonical name, e.g. "0.20"
    description: str
    default_gmu: float
    # Hybrid block size: the attention block is raised to a multiple of this until one attention
    # page holds one mamba page (0.20.2: 16; newer: the backend's kernel block).
    hybrid_block_multiple: int
    # In "align" mamba cache mode on Hopper with FlashInfer GDN, newer versions align to 64.
    align_block_multiple_hopper: int
    # Mamba cache mode when --enable-prefix-caching is not given: "none" or "align".
    mamba_mode_default: str
    # Extra mamba blocks per GDN group in "align" mode on Hopper (FlashInfer prefill checkpoints).
    align_hopper_extra_blocks: int
    # Blocks the ceiling check keeps back (0.33 reserves one null block).
    reserved_null_blocks: int
    # How "GPU KV cache size: N tokens" is computed: "concurrency" (int(concurrency * L)) or
    # "groups" (num_blocks // num_groups * block_size, about 0.19 and before).
    kv_tokens_formula: str
    # Whether the CUDA graph memory estimate is subtracted from the KV budget.
    cudagraph_estimate_in_budget: bool
    # Whether a new max_model_len is a new torch.compile cache key (its first boot compiles cold).
    # 0.20.2: measured (the cache directory changes with max_model_len); None: not measured.
    compile_key_has_max_model_len: bool | None = None
    # Default max_num_batched_tokens / max_num_seqs of `vllm serve` (big: >= 70 GiB, not A100).
    serve_defaults_big: tuple[int, int] = (8192, 1024)
    serve_defaults_small: tuple[int, int] = (2048, 256)
    big_gpu_threshold_gib: float = 70.0
    # 0.28.0+: GPUs of at least this many GiB (B200/B300) get 16384 / 1024 (engine/arg_utils.py get_batch_defaults)
    huge_gpu_threshold_gib: float | None = None
    serve_defaults_huge: tuple[int, int] = (16384, 1024)
    # Where the coefficients of this range come from: measured logs, or inherited ("" = not measured).
    measured: str = ""
    # Batches of max_num_batched_tokens a sliding-window layer keeps beside its window (0.26: async
    # scheduling, on by default, holds 2 batches in flight: VllmConfig.max_in_flight_tokens).
    sliding_in_flight_batches: int = 1
    # What this version does with a model type beyond its plan (seen on the lab host), said with every prediction.
    model_notes: tuple[tuple[str, str], ...] = ()
    # Whether a DFlash drafter's sliding_attention layers are built as sliding-window layers (0.26 source:
    # qwen3_dflash.py _resolve_layer_attention); 0.20 builds every drafter layer as full attention (public logs).
    drafter_sliding_layers: bool = False
    # Bytes per (group, output) that a 4-bit group-quantized Linear (AWQ, GPTQ / AutoRound) holds once loaded beyond
    # its checkpoint tensors and what the kernel keeps of them (gpu_facts.json mixed_precision_kernels). Measured, cause
    # not traced in the source: 0.26.0 on the H100 loads 1.5 more (Qwen3.5-9B AWQ via Machete +0.05 GiB,
    # Qwen3.6-27B AutoRound via Machete and via Marlin +0.27 GiB each: lab-vllm-0.26.0-h100/awq-e-fp8-mtp2-pc,
    # quant/q36ar*, within the logs' 0.01 GiB); 0.20.2 loads the same AWQ layout at its computed size (p5, p6).
    int4_group_load_extra_bytes: float = 0.0
    # Whether a Qwen3.5-layout GDN layer's b/a projection (in_proj_b, in_proj_a) stays whole on every tensor-parallel
    # rank under an AWQ, GPTQ or AutoRound (INC) checkpoint: Marlin needs >= 64 outputs per rank, so 0.26 replicates
    # it and slices b/a in forward (qwen_gdn_linear_attn.py maybe_disable_tp; vllm-project/vllm#35924). 0.20.2 shards it.
    gdn_ba_replicated_int4: bool = False
    # How the profile's dummy sampler run applies top-k / top-p (v1/sample/ops/topk_topp_sampler.py): "sort" (torch
    # sort of every logit row: 0.10-0.16, peaks at a measured number of bytes per logit, coefficients
    # sampler_sort_*), "kernel" (0.17+: a Triton kernel for 8 rows or more, FlashInfer's where it is on: the fitted
    # activation_sampler_factor). 0.10.0-0.11.0 take FlashInfer's sampler where FlashInfer is installed (vLLM's
    # Docker image; pip's vllm lists it only as an extra); a log says which ran (LogFacts.sampler).
    sampler: str = "kernel"
    # What vLLM does when max_num_seqs exceeds a hybrid's KV cache blocks with FULL CUDA graphs: "raise" (0.20.2-0.33.0:
    # ValueError in config/compilation.py resolve_cudagraph_mode_and_sizes) or "cap" (0.19.1: capture sizes capped to
    # the blocks with a warning; the ranges before it are planned as 0.19)
    mamba_block_check: str = "raise"
    # Whether Model Runner V2 estimates its CUDA graphs and subtracts them from the KV budget (0.29+: a throwaway
    # capture in v1/worker/gpu/cudagraph_utils.py; before, profile_cudagraph_memory returns 0 and V2's graphs are
    # captured after the KV cache, outside the budget)
    v2_graph_estimate_in_budget: bool = False
    # Whether the fused-MoE scratch stays allocated after a forward (v1/worker/workspace.py WorkspaceManager, from
    # 0.13.0; 0.10.2-0.12.0 allocate it per call), so that the sampler's dummy run peaks on top of it
    moe_workspace_kept: bool = True
    # MLA's chunked-prefill workspace (tokens), which sizes the placeholder an MLA layer allocates in the profile run
    # (mla_attention.py determine_chunked_prefill_workspace_size): 0.26.0 raises it to max_num_seqs x block_size at
    # least; 0.33.0 rounds it up to a whole block instead (read in each wheel's source; 0.27-0.32 not read: as 0.26)
    mla_workspace_seq_floor: bool = True
    # 0.27+: the budget is requested - (the drop in free memory over loading and profiling + the profile's transient
    # peak) (utils/mem_utils.py), so buffers a runner keeps from its start count: Model Runner V2's per-request
    # sampling state (budget.v2_runner_buffers); before, only weights + torch peak increase + non-torch counted
    runner_buffers_in_budget: bool = False
    # 0.33: Model Runner V2's dummy sampler adds a pass with real sampling parameters on an fp32 copy of the logits
    v2_sampler_fp32_pass: bool = False
    # the compiled forward's dense-MLP peak traced in the source (ModelArch.compiled_forward_bytes) in place of the
    # fitted per-width term (0.33: Mistral Small 3.1 and Qwen3-VL-8B at 32,768 tokens)
    compiled_forward_traced: bool = False
    # vLLM loads the weights under this max_split_size (MiB; 0: the user's allocator settings), which leaves holes in
    # the segments of a tower's mid-size weights (model/allocator.load_holes_bytes): v1/worker/gpu_worker.py load_model
    # (0.26.0 and 0.33.0 source); planned from 0.33, where the towers are traced (before it their fitted figures, from
    # logs that held these holes, stand for them: a public 0.29.0 Qwen3.8-27B log's consumed memory is met without)
    weights_load_max_split_mib: int = 0
    # Whether Mamba 'align' mode asserts block_size <= max_num_batched_tokens (config/vllm.py validate_block_size,
    # 0.19.1-0.26.0; removed in 0.27.1)
    align_block_assert: bool = True
    # How a deployment over several hosts starts: "ray" (a Ray cluster, `vllm serve --distributed-executor-backend
    # ray` on the head: vLLM's multi-node documentation) or "nnodes" (the same `vllm serve` on every host with
    # --nnodes / --node-rank / --master-addr, the others --headless: 0.26.0's entrypoints/cli/serve.py and
    # config/parallel.py; not read in the ranges before)
    multi_host: str = "ray"
    # Whether the default capture sizes also hold every uniform decode batch (n requests x (1 + k) tokens), 0.33
    # config/vllm.py _set_cudagraph_sizes; before: the base list alone
    uniform_decode_capture: bool = False
    # Whether Model Runner V2 keeps every request's token ids on the GPU with the n-gram drafter (max_num_seqs x
    # max_model_len int32; elsewhere host memory through UVA): 0.33 v1/worker/gpu/states.py use_dense_all_token_ids
    ngram_tokens_on_gpu: bool = False
    # Whether `--max-model-len -1` (auto) lets vLLM fit the length to its KV cache after profiling, with the length
    # out of the compile-cache key (the key holds the model's maximum it started from): read in 0.20.2's and 0.33.0's
    # kv_cache_utils / kv_cache_planning and seen in 0.20.2's logs (probe-vllm-0.20.2-h200/autofit-graphs-boot2: the
    # second boot loads the first's compiled graphs); not read before 0.20
    auto_fit_keeps_compile_key: bool = False
    # The attention backend (name, CUDA-graph support) vLLM picks for a multimodal prefix LM with its tower loaded
    # (Gemma 3: bidirectional attention over an image's tokens). FlashAttention needs FA4 for it, which does not
    # resolve for head size 256, so 0.33.0 takes TRITON_FLASH_ATTN, support NEVER: PIECEWISE graphs only
    # (lab-vllm-0.33.0-h100/vision/g3-4b-vis: 'setting cudagraph_mode=PIECEWISE'). None: not measured (0.26.0's
    # fallback is another backend), so such a tower is refused on that version.
    mm_prefix_backend: tuple[str, str] | None = None
    # The vision towers whose encoder peak was traced in this range's source and checked on its startups
    # (towers/: Tower.traced); such a tower is refused on other versions (0.33.0: SigLIP, the Qwen3-VL and
    # Qwen2.5-VL ViTs, lab-vllm-0.33.0-h*/vision)
    traced_towers: tuple[str, ...] = ()
    # Whether sparse MLA (DeepSeek V3.2, GLM-5: the indexer's cache, buffers and workspaces, layers/sparse_mla.py) was
    # read in this range's source and measured: 0.33.0 (lab-vllm-0.33.0-h200/families/dsv32-*, glm5-*); else refused
    sparse_mla: bool = False
    # The last minor version this range's rules were read for (e.g. "0.16": the sampler checked in 0.10.2-0.16.0's
    # source), so a version up to it is inside the range, not between two ranges ("": only the range's own minor).
    covers: str = ""


_R020 = VllmRules(
    version="0.20", description="vLLM 0.20.x (verified on 0.20.2 H200 logs)",
    # default GMU 0.92: config/cache.py of the 0.20.0 / 0.20.2 / 0.21.0 / 0.22.1 wheels (every lab log sets its GMU;
    # a public 0.22.1 boot without --gpu-memory-utilization logs 'The current --gpu-memory-utilization=0.9200')
    default_gmu=0.92, hybrid_block_multiple=16, align_block_multiple_hopper=16,
    mamba_mode_default="none", align_hopper_extra_blocks=0, reserved_null_blocks=0,
    kv_tokens_formula="concurrency", cudagraph_estimate_in_budget=True, compile_key_has_max_model_len=True,
    measured="vLLM 0.20.2 startups on H100/H200 (tests/fixtures)", auto_fit_keeps_compile_key=True,
)

GEMMA4_TF_NOTE = (
    "vLLM 0.26.0 reads Gemma 4's full-attention shape (global_head_dim, num_global_key_value_heads) only with "
    "transformers <= 5.14: 5.15 and later move it into per_layer_config; with 5.17 the lab's startup failed to read "
    "the config until patched, then planned the full layers as 16 KV heads of 256 (tests/fixtures/"
    "lab-vllm-0.26.0-h100/g31-e-bf16.log). On Hopper with bf16 KV it picks FlashAttention 4, which needs "
    "nvidia-cutlass-dsl installed")

_R019 = VllmRules(
    version="0.19", description="vLLM 0.19.x (KV tokens logged as blocks // groups x B)",
    default_gmu=0.9, hybrid_block_multiple=16, align_block_multiple_hopper=16,
    mamba_mode_default="none", align_hopper_extra_blocks=0, reserved_null_blocks=0,
    kv_tokens_formula="groups", cudagraph_estimate_in_budget=False, mamba_block_check="cap",
)

RULES: dict[str, VllmRules] = {
    # 0.10.x-0.18.x: their KV plan not read in source; planned as 0.19, which every public log of them reproduces
    # (the KV plan of the 0.10-0.18 logs in tests/fixtures/public-logs: exact or within the logged rounding) and
    # whose budget keeps CUDA graphs outside (a public 0.10.2 H100 boot states its own split: 71.26 GiB requested =
    # 56.93 weights + 5.58 peak activation + 0.07 non-torch + 8.68 KV; its 0.69 GiB of graphs come on top:
    # c-h100-qwen3-30b-a3b-v0.10.2.log). Their sampler read in the 0.10.2-0.17.1 wheels' source: a torch sort
    # up to 0.16, a Triton kernel from 0.17.0.
    "0.10": replace(_R019, version="0.10", sampler="sort", covers="0.16", moe_workspace_kept=False,
                    description="vLLM 0.10.x-0.16.x (KV plan as 0.19's: not read in source, their public logs "
                    "reproduce it; the sampler's top-k/top-p by sort, read in source)"),
    "0.17": replace(_R019, version="0.17", description="vLLM 0.17.x-0.18.x (planned as 0.19: not read in source; "
                    "their public logs reproduce its KV plan)"),
    "0.19": _R019,
    "0.20": _R020,
    # the KV plan of every 0.26.0 log follows 0.20's rules; what differs is CHANGES[("0.20", "0.26")]
    "0.26": replace(_R020, version="0.26", multi_host="nnodes",
                    description="vLLM 0.26.x (verified on 0.26.0 H100 and 2x H200 logs)",
                    default_gmu=0.92, sliding_in_flight_batches=2, model_notes=(("gemma4", GEMMA4_TF_NOTE),),
                    drafter_sliding_layers=True, int4_group_load_extra_bytes=1.5, gdn_ba_replicated_int4=True,
                    measured="vLLM 0.26.0 startups on H100 and 2x H200 (tests/fixtures/lab-vllm-0.26.0-*)"),
}
# 0.27-0.33 from their wheels' source (the host runs 0.26.0 at the newest); each range names what changed in CHANGES.
RULES["0.27"] = replace(RULES["0.26"], version="0.27", measured="", model_notes=(), align_block_assert=False,
                        runner_buffers_in_budget=True,
                        description="vLLM 0.27.x (from its source: the budget counts what loading and profiling "
                        "consumed; not measured here, public 0.27.1 logs in the corpus)")
RULES["0.28"] = replace(RULES["0.27"], version="0.28", mamba_mode_default="align", huge_gpu_threshold_gib=160.0,
                        description="vLLM 0.28.x (from its source: prefix caching and Mamba 'align' mode on by "
                        "default for hybrids; not measured)")
RULES["0.29"] = replace(RULES["0.28"], version="0.29", reserved_null_blocks=1, v2_graph_estimate_in_budget=True,
                        description="vLLM 0.29.x-0.32.x (from its source: Model Runner V2 for every model, its CUDA "
                        "graphs estimated into the budget, one null block kept back; not measured, public 0.29.0 "
                        "logs in the corpus)", covers="0.32")
RULES["0.33"] = replace(RULES["0.29"], version="0.33", align_block_multiple_hopper=64, align_hopper_extra_blocks=1,
                        v2_sampler_fp32_pass=True, compiled_forward_traced=True, weights_load_max_split_mib=20,
                        covers="", uniform_decode_capture=True, ngram_tokens_on_gpu=True,
                        # 4-bit AWQ layers load at their computed size (Qwen3.5-9B-AWQ + MTP 2: 10.56 GiB, 0.26.0: 10.66)
                        int4_group_load_extra_bytes=0.0, mla_workspace_seq_floor=False,
                        mm_prefix_backend=("TRITON_FLASH_ATTN", "NEVER"), sparse_mla=True,
                        traced_towers=("SigLIP", "Qwen3-VL ViT", "Qwen2.5-VL ViT", "Llama 4 ViT", "Pixtral ViT",
                                       "Gemma 4 ViT"),
                        measured="vLLM 0.33.0 startups on H100 and 4x H200 (tests/fixtures/lab-vllm-0.33.0-*)",
                        description="vLLM 0.33.x, the current release (measured: 20 `vllm serve` startups of 0.33.0 on "
                        "H200s, torch 2.14.0)")
NEWEST = "0.33"


def _key(version: str) -> tuple[int, int]:
    parts = version.lstrip("v").split(".")
    try:
        return int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        raise UserError(f"cannot read vLLM version {shown(version)}; write it like 0.20.2") from None


# Patch releases inside a range that differ from it: (range, patches below which) -> changed fields. 0.20.0 and
# 0.20.1 still logged 'GPU KV cache size' as blocks // groups x block size: a public 0.20.1rc1 boot (club-3090
# issue 46, 2x RTX 4090) reproduces only so, a 0.20.2rc1 boot (issue 75, 2x RTX 3090) only as concurrency x length.
PATCH_RULES: dict[tuple[str, int], dict[str, str]] = {
    ("0.20", 2): {"kv_tokens_formula": "groups"},
}


def _patch(version: str) -> int:
    parts = version.lstrip("v").split(".")
    digits = "".join(ch for ch in (parts[2] if len(parts) > 2 else "0").split("rc")[0] if ch.isdigit())
    return int(digits or 0)


def rules_for(version: str | None) -> VllmRules:
    """The rules of the newest known range at or below `version` (default: the newest)."""
    if not version:
        return RULES[NEWEST]
    want = _key(version)
    known = sorted(RULES, key=_key)
    if want < _key(known[0]):
        raise UserError(f"vLLM {version} is older than the oldest modelled range "
                        f"({known[0]}); supported: {', '.join(known)}")
    best = [k for k in known if _key(k) <= want][-1]
    rules = RULES[best]
    for (rng, below), changes in PATCH_RULES.items():
        if rng == best and want == _key(rng) and _patch(version) < below:
            rules = replace(rules, **changes)
    return rules


# What changed from one modelled range to the next: from the 0.20.2 and 0.26.0 logs and the 0.20.2 / 0.26.0 /
# 0.33.0 wheels' source. A version between two ranges has not been read, so which of these it has is not known.
CHANGES: dict[tuple[str, str], tuple[str, ...]] = {
    ("0.10", "0.17"): ("the sampler's top-k / top-p: a torch sort of every logit row (0.10-0.16, 38 bytes a logit "
                       "at its peak, measured) -> a Triton kernel (0.17+, about 15)",),
    ("0.17", "0.19"): ("not known: 0.17-0.18 are planned as 0.19 (their public logs reproduce its KV plan)",),
    ("0.19", "0.20"): ("'GPU KV cache size' logged as concurrency x max_model_len", "CUDA graph memory in the budget",
                       "default GMU 0.90 -> 0.92 (config/cache.py of the 0.19.0 and 0.20.0 wheels)"),
    ("0.20", "0.26"): ("activation peak: the forward pass's and the sampler's peaks no longer add (measured)",
                       "sliding-window layers keep 2 batches in flight beside the window (async scheduling)",
                       "4-bit AWQ / GPTQ layers load 1.5 bytes per group and output more (measured)",
                       "a GDN layer's b/a projection stays whole on each TP rank under AWQ / GPTQ / AutoRound (source)"),
    ("0.26", "0.27"): ("the budget counts what loading and profiling consumed: Model Runner V2's per-request "
                       "sampling buffers (about 4 x max_num_seqs x vocab bytes) come off the KV cache",
                       "Model Runner V2 profiles the vision encoder"),
    ("0.27", "0.28"): ("prefix caching on by default for hybrids: Mamba 'align' mode, 2 + k state blocks a request",
                       "GPUs of 160 GiB or more default to 16384 batched tokens"),
    ("0.28", "0.29"): ("Model Runner V2 for every model (hybrids and MoE included), its CUDA graphs estimated into "
                       "the budget", "one null block kept back from the ceiling check"),
    ("0.29", "0.33"): ("align-mode block multiple 64 on Hopper with FlashInfer's GDN prefill, one more state block",
                       "Model Runner V2's dummy sampler adds an fp32 pass with real sampling parameters",
                       "MLA's chunked-prefill workspace rounded up to a block, no longer raised to a block per "
                       "sequence (source)",
                       "the compiled forward's dense-MLP peak traced (the 0.33.0 lab; before it the fitted term)",
                       "the vision tower's load holes counted (the 0.33.0 lab; before it the fitted tower figures)"),
}


@dataclass(frozen=True)
class VersionChoice:
    """The vLLM version a prediction models, how it was chosen and what is not known about it."""

    asked: str  # e.g. "0.26.0"
    how: str  # "given" | "installed" | "newest"
    rules: VllmRules
    warnings: tuple[str, ...] = ()

    @property
    def measured(self) -> bool:
        return bool(self.rules.measured) and _key(self.asked) == _key(self.rules.version)

    @property
    def label(self) -> str:
        """e.g. 'vLLM 0.26.0 (installed; 0.20 rules, coefficients from 0.20.2 logs; 0.26 not measured)'."""
        how = {"given": "", "installed": "installed; ", "newest": "newest modelled; "}[self.how]
        if self.measured:
            what = f"measured: {self.rules.measured}"
        elif self.rules.version == NEWEST:
            what = f"{self.rules.version} rules from source, coefficients from 0.26.0 logs; not measured"
        else:
            src = "0.26.0" if _key(self.rules.version) >= (0, 26) else "0.20.2"
            if self.rules.sampler == "sort":
                src += " logs, public 0.10.2 logs and the sort sampler measured on its own"
            else:
                src += " logs"
            what = f"{self.rules.version} rules, coefficients from {src}; {self.asked} not measured"
        return f"vLLM {self.asked} ({how}{what})"


def installed_vllm() -> str | None:
    """The version of the vllm package installed here, from its dist-info folder name on sys.path
    (its package metadata; vllm is never imported, and importlib.metadata's full scan is avoided)."""
    import glob
    import os
    import sys

    for entry in sys.path:
        for info in sorted(glob.glob(os.path.join(entry or ".", "vllm-*.dist-info"))):
            version = os.path.basename(info)[len("vllm-"):-len(".dist-info")]
            if version and version[0].isdigit():
                return version
    return None


def choose_version(given: str | None) -> VersionChoice:
    """--vllm-version, else the installed vLLM, else the newest modelled range; with what is unknown."""
    if given:
        asked, how = given.lstrip("v"), "given"
    else:
        inst = installed_vllm()
        asked, how = (inst, "installed") if inst else (NEWEST, "newest")
    rules = rules_for(asked)
    want, base = _key(asked), _key(rules.version)
    warnings: list[str] = []
    if want > _key(NEWEST):
        warnings.append(f"vLLM {asked} is newer than the newest modelled release ({NEWEST}): planned with "
                        f"{NEWEST}'s rules, which nobody has checked against {asked}")
    elif rules.covers and want <= _key(rules.covers):
        warnings.append(f"vLLM {asked} is planned with the {rules.version} range, {rules.description}"
                        + ("; its terms besides the sampler's are estimates: none was measured on it"
                           if rules.sampler == "sort" else ""))
    elif want != base:
        nxt = min((k for k in RULES if _key(k) > want), key=_key)
        changed = CHANGES.get((rules.version, nxt), ())
        warnings.append(f"vLLM {asked} lies between the modelled {rules.version} and {nxt}: planned with "
                        f"{rules.version}'s rules, but between them vLLM changed ({'; '.join(changed)}) "
                        f"and which of these {asked} has is not known here")
    return VersionChoice(asked, how, rules, tuple(warnings))


# How `cudagraph_mode` resolves (vLLM 0.20.2 config/compilation.py resolve_cudagraph_mode_and_sizes, called from
# gpu_model_runner._check_and_update_cudagraph_mode with the lowest CUDA-graph support among the attention groups'
# builders; 0.26.0's is the same). Support levels: v1/attention/backend.py AttentionCGSupport.
CG_SUPPORT = {"NEVER": 0, "UNIFORM_SINGLE_TOKEN_DECODE": 1, "UNIFORM_BATCH": 2, "ALWAYS": 3}


def cudagraph_mode(eager: bool, spec_tokens: int, support: str) -> str:
    """The mode vLLM runs for the default FULL_AND_PIECEWISE: NONE in eager mode; PIECEWISE where decode would need
    FULL graphs of 1 + k tokens a request (speculative decoding) that the backend cannot capture (below
    UNIFORM_BATCH, e.g. FlashInfer without TRT-LLM attention), or no FULL graphs at all (NEVER); else
    FULL_AND_PIECEWISE. PIECEWISE runs attention outside the graphs, so a backend's lazily allocated buffers arrive
    with the first request instead of in the capture."""
    if eager:
        return "NONE"
    level = CG_SUPPORT[support]
    if level == CG_SUPPORT["NEVER"] or (spec_tokens and level < CG_SUPPORT["UNIFORM_BATCH"]):
        return "PIECEWISE"
    return "FULL_AND_PIECEWISE"


# Which model runner vLLM picks (config/vllm.py VllmConfig.use_v2_model_runner, VLLM_USE_V2_MODEL_RUNNER unset),
# read in the 0.19.1-0.33.0 wheels: V1 (v1/worker/gpu_model_runner.py) until 0.22; from 0.22 Model Runner V2
# (v1/worker/gpu/model_runner.py) for an allow-list that grew each release; from 0.29 (#53183) for every model.
# (first version, architectures that take V2 whatever they are, whether any dense non-hybrid decoder takes V2,
#  whether a quantized or MoE model of the list may)
_V2_ARCHS_024 = ("Qwen3ForCausalLM", "DeepseekV2ForCausalLM", "Qwen2MoeForCausalLM", "GraniteMoeForCausalLM",
                 "LlamaForCausalLM", "MistralForCausalLM")
_V2_MOE_ARCHS_025 = ("DeepseekV2ForCausalLM", "Qwen2MoeForCausalLM", "GraniteMoeForCausalLM")
_V2_MOE_ARCHS_026 = _V2_MOE_ARCHS_025 + ("InklingForCausalLM", "InklingForConditionalGeneration",
                                         "LongcatFlashNgramForCausalLM")


@dataclass(frozen=True)
class RunnerInputs:
    """What vLLM's runner choice reads of a deployment."""

    architecture: str  # config.json's architectures[0]
    moe: bool
    hybrid: bool  # Mamba-type state layers (GatedDeltaNet, Mamba1/2, ...)
    quantized: bool
    speculative_method: str | None  # "mtp", "ngram", "dflash" or None


def model_runner(version: str, m: RunnerInputs) -> str:
    """"v1" or "v2": the model runner vLLM `version` picks for this model when VLLM_USE_V2_MODEL_RUNNER is unset
    (config/vllm.py _is_default_v2_model_runner_model and _get_v2_model_runner_unsupported_features; the note
    behind this table: docs/vllm-rules.md)."""
    v = _key(version)
    if v < (0, 22):
        return "v1"  # the env var defaults to off
    if m.speculative_method == "ngram" and v < (0, 32):
        return "v1"  # ngram drafting is a V1-only feature until 0.32
    if v >= (0, 29):
        return "v2"
    if v < (0, 24):
        archs = ("Qwen3ForCausalLM",) if v < (0, 23) else ("Qwen3ForCausalLM", "LlamaForCausalLM", "MistralForCausalLM")
        return "v2" if m.architecture in archs and not m.moe and not m.quantized else "v1"
    if v < (0, 25):
        return "v2" if m.architecture in _V2_ARCHS_024 else "v1"
    if m.hybrid:  # 0.27-0.28 admit listed hybrids (KimiK3, DeepseekV4), none of the families modelled here
        return "v1"
    moe_archs = _V2_MOE_ARCHS_025 if v < (0, 26) else _V2_MOE_ARCHS_026
    return "v2" if not m.moe or m.architecture in moe_archs else "v1"
