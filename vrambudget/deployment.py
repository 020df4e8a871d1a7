"""A deployment: model, GPU, vLLM version and flags, with vLLM's defaults filled in."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any

from .model.checkpoint import ModelSource
from .model.lora import LoraSlots, not_modelled as lora_not_modelled
from .errors import UserError
from .hardware.catalog import GPU
from .units import GiB
from .vllm_rules import VllmRules

KV_DTYPES = {"auto": None, "bfloat16": 2, "float16": 2, "fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1,
             "int8_per_token_head": 1, "fp8_per_token_head": 1}
# per-token-head KV keeps one fp32 scale per head and token for K and one for V, carved from the KV pages
# (vLLM 0.20.2 and 0.26.0 v1/kv_cache_interface.py AttentionSpec.unpadded_page_size_bytes)
KV_SCALE_BYTES = {"int8_per_token_head": 4, "fp8_per_token_head": 4}


def kv_backend_class(kv_cache_dtype: str) -> str:
    """The KV dtype as attention backends accept it: bf16 (auto/bf16/fp16), fp8 (e4m3), fp8_e5m2 or
    per_token_head (vLLM 0.26 source: FlashAttention reads fp8 e4m3 only, as FA3 on Hopper; per-token-head KV
    only TRITON_ATTN; fp8_e5m2 FlashInfer or Triton)."""
    if kv_cache_dtype in KV_SCALE_BYTES:
        return "per_token_head"
    if kv_cache_dtype == "fp8_e5m2":
        return "fp8_e5m2"
    return "fp8" if kv_cache_dtype.startswith("fp8") else "bf16"


def gmu_flag(gmu: float) -> str:
    """The GMU as passed to vLLM: two decimals where that is exact (0.90), else every digit (0.093), never
    rounded (a probe at GMU 0.093 once started vLLM at 0.09)."""
    return f"{gmu:.2f}" if round(gmu, 2) == gmu else f"{gmu:g}"


@dataclass(frozen=True)
class Flags:
    """vLLM flags as the user gave them (None = vLLM's default for this GPU and version)."""

    gpu_memory_utilization: float | None = None
    kv_cache_dtype: str = "auto"
    dtype: str = "auto"  # vLLM's --dtype: the weights' and activations' dtype (auto: the config's, resolved)
    enforce_eager: bool = False
    num_speculative_tokens: int = 0  # MTP tokens; 0 = no speculative decoding
    speculative_method: str = "mtp"
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    max_model_len: int | None = None  # None: the model's own maximum; -1: auto-fit
    enable_prefix_caching: bool = False
    tensor_parallel_size: int = 1
    compile_cache: str = "cold"  # "cold" or "warm": was this exact graph compiled before? "warm-jit": it was, but the
    # Triton kernel cache is gone (a container without a persisted ~/.triton), so kernels JIT-compile in the profile;
    # "fresh": nothing was
    # (the first boot on this machine or after an upgrade: Triton kernels JIT-compile inside the profile too)
    language_model_only: bool | None = None  # None: on for multimodal checkpoints
    # vLLM's --limit-mm-per-prompt as (modality, items) pairs; () its default (999 of each)
    limit_mm_per_prompt: tuple[tuple[str, int], ...] = ()
    # vLLM's --mm-processor-kwargs as compact JSON ('' : none): the processor settings that size the profiled items
    mm_processor_kwargs: str = ""
    other_gpu_bytes: int = 0  # memory other processes hold on the GPU
    free_at_start_bytes: int | None = None  # the free memory vLLM sees at start, where known (its log's "Free memory on
    # device (X/Y GiB)"; a simulated card's): replaces total - CUDA context - other processes
    expandable_segments: bool = False  # PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
    flashinfer_workspace_bytes: int | None = None  # VLLM_FLASHINFER_WORKSPACE_BUFFER_SIZE (None: vLLM's 394 MiB)
    allow_long_max_model_len: bool = False  # VLLM_ALLOW_LONG_MAX_MODEL_LEN=1: a max_model_len above the model's
    attention_backend: str | None = None  # vLLM's --attention-backend (None: the one vLLM picks)
    gdn_prefill_backend: str | None = None  # vLLM's --gdn-prefill-backend (None: FlashInfer on Hopper, Triton elsewhere)
    draft_model: str | None = None  # an external drafter (DFlash): bundled name or a folder with its config.json
    lora: LoraSlots | None = None  # --enable-lora with its --max-loras / --max-lora-rank (None: no LoRA)
    # ngram's n-gram lengths as given in the speculative config (None: not given, vLLM's default)
    prompt_lookup_min: int | None = None
    prompt_lookup_max: int | None = None


SPEC_METHODS = ("mtp", "ngram", "dflash")
# boot states: cold (a first torch.compile of this graph), warm (compiled before, Triton cache kept), warm-jit (compiled
# before, Triton cache gone), fresh (a machine's first boot: nothing cached)
COMPILE_STATES = ("cold", "warm", "warm-jit", "fresh")


def parse_speculative_config(text: str) -> tuple[str, int, str | None]:
    """--speculative-config JSON -> (method, num_speculative_tokens, drafter model or None)."""
    from .inputs import loads

    example = "write it like '{\"method\":\"mtp\",\"num_speculative_tokens\":2}'"
    try:
        cfg = loads(text, "--speculative-config")
    except UserError as e:
        raise UserError(f"{e}; {example}") from None
    if not isinstance(cfg, dict) or not isinstance(cfg.get("method"), str):
        raise UserError(f"--speculative-config needs at least a \"method\" key (a name); {example}")
    k, model = cfg.get("num_speculative_tokens", 1), cfg.get("model")
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= 64:
        raise UserError(f"--speculative-config: num_speculative_tokens {k!r} is not a whole number from 1 to 64")
    if model is not None and not isinstance(model, str):
        raise UserError(f"--speculative-config: model {model!r} is not a name or a folder")
    ngram_lookup(cfg)  # refused here, in one line, rather than by vLLM at start
    return cfg["method"], k, model or None


def ngram_lookup(cfg: Any, what: str = "--speculative-config") -> dict[str, int]:
    """The speculative config's prompt_lookup_min / prompt_lookup_max (ngram's n-gram lengths) where given, as Flags
    fields; `cfg` is the JSON text or its dict. vLLM (config/speculative.py) takes whole numbers >= 1, min <= max."""
    if isinstance(cfg, str):
        from .inputs import loads

        cfg = loads(cfg, what)
    if not isinstance(cfg, dict):
        return {}
    out: dict[str, int] = {}
    for key in ("prompt_lookup_min", "prompt_lookup_max"):
        v = cfg.get(key)
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= 65536:
            raise UserError(f"{what}: {key} {str(v)[:20]!r} is not a whole number from 1 to 65536")
        out[key] = v
    if out.get("prompt_lookup_min", 0) > out.get("prompt_lookup_max", 65536):
        raise UserError(f"{what}: prompt_lookup_min {out['prompt_lookup_min']} is above prompt_lookup_max "
                        f"{out['prompt_lookup_max']}, which vLLM refuses")
    return out


def drafter_reference(ref: str) -> str | None:
    """What vLLM's speculative config names for a local drafter: its folder (a config.json given: the folder that
    holds it), absolute, as `load_drafter` found it; None for a bundled drafter (its name is kept)."""
    import os

    from .model.drafter import bundled_drafters

    if ref in bundled_drafters():
        return None
    path = os.path.expanduser(ref)
    return os.path.abspath(path if os.path.isdir(path) else os.path.dirname(path) or ".")


@dataclass(frozen=True)
class Defaulted:
    """An input the user did not choose, said as such: the `Flags` field it sets and the words for it."""

    flag: str  # "gpu_memory_utilization", "max_num_seqs", "max_num_batched_tokens", "kv_cache_dtype", "max_model_len"
    text: str

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True)
class Deployment:
    """Everything resolved: no None left in the flags that matter."""

    model: ModelSource
    gpu: GPU
    rules: VllmRules
    gmu: float
    kv_cache_dtype: str
    kv_dtype_bytes: int
    enforce_eager: bool
    spec_tokens: int  # speculative tokens per step (MTP or ngram); 0 = off
    max_num_seqs: int
    max_num_batched_tokens: int
    max_model_len: int  # what vLLM runs with (the model's maximum when not given)
    auto_fit: bool  # --max-model-len -1/auto: vLLM lowers it to the ceiling
    max_model_len_given: bool  # False: vLLM's default, the model's own maximum
    enable_prefix_caching: bool
    tp: int
    compile_cache: str
    language_model_only: bool
    other_gpu_bytes: int
    speculative_method: str = "mtp"
    defaults: tuple[Defaulted, ...] = ()  # inputs the user did not choose: vLLM's defaults, said as such
    attention_backend: str | None = None  # forced with --attention-backend
    gdn_prefill_backend: str | None = None  # forced with --gdn-prefill-backend ("triton" / "flashinfer")
    int4_kernel: str | None = None  # the 4-bit kernel ("Machete" / "Marlin") where a log names it; None: vLLM's pick
    vllm: Any = None  # vllm_rules.VersionChoice: the version asked for, how it was chosen, what is unknown
    drafter: Any = None  # drafter.Drafter: an external (DFlash) drafter's shape, with speculative method dflash
    free_at_start_bytes: int | None = None  # given (Flags.free_at_start_bytes); None: from the CUDA context
    expandable_segments: bool = False
    flashinfer_workspace_bytes: int | None = None
    dtype_flag: str = "auto"  # --dtype as given (the resolved dtype is model.arch.dtype)
    lora: LoraSlots | None = None  # --enable-lora: slots allocated at load (model/lora.py)
    max_num_seqs_given: bool = True  # False: vLLM's default, which plan/table/serve-cmd may lower (and say so)
    # a pipeline-parallel stage (parallel.py): whether it is the first / the last (the sampler runs on the last; every
    # later stage keeps the intermediate tensors it receives); one GPU: both
    pp_first: bool = True
    pp_last: bool = True
    # several GPUs (parallel.py): pipeline stages, data-parallel engines, expert parallel, one card per rank
    pp: int = 1
    dp: int = 1
    expert_parallel: bool = False
    gpus: tuple = ()  # the cards as listed in --gpu (one: every rank alike)
    pp_partition: str | None = None  # VLLM_PP_LAYER_PARTITION as vLLM reads it ('12,20'); None: vLLM's even split
    nodes: int = 1  # hosts the workers are spread over (vLLM's --nnodes)
    draft_model: str | None = None  # a local drafter's folder, absolute, as the speculative config names it
    prompt_lookup_min: int | None = None  # ngram's n-gram lengths where given (Flags)
    prompt_lookup_max: int | None = None
    mm_limits: tuple[tuple[str, int], ...] = ()  # --limit-mm-per-prompt as given (Flags.limit_mm_per_prompt)
    mm_processor_kwargs: str = ""  # --mm-processor-kwargs as given, compact JSON (Flags.mm_processor_kwargs)

    @property
    def mm_off(self) -> frozenset[str]:
        """The modalities --limit-mm-per-prompt turns off: vLLM profiles the tower without them."""
        return modalities_off(self.mm_limits)

    @property
    def mla_fp8_ds(self) -> bool:
        """Sparse MLA with an fp8 cache: FLASHMLA_SPARSE's fp8_ds_mla format (656 bytes a token)."""
        return self.model.arch.uses_sparse_mla and self.kv_dtype_bytes == 1

    @property
    def mla_block_size(self) -> int:
        """The MLA backend's block on this GPU for this KV dtype (16 where the model has no MLA)."""
        if not self.model.arch.uses_mla:
            return 16
        from .hardware.facts import mla_backend

        return mla_backend(self.gpu, kv_backend_class(self.kv_cache_dtype), self.model.arch.uses_sparse_mla)[1]

    @property
    def version_label(self) -> str:
        """The vLLM version modelled and whether it was measured (VersionChoice.label)."""
        return self.vllm.label if self.vllm else f"vLLM {self.rules.version}"

    @property
    def runner(self) -> str:
        """The model runner vLLM picks for this deployment: "v1" or "v2" (vllm_rules.model_runner)."""
        from .vllm_rules import RunnerInputs, model_runner

        a = self.model.arch
        version = self.vllm.asked if self.vllm is not None else self.rules.version
        return model_runner(version, RunnerInputs(a.architecture, a.moe is not None, a.is_hybrid,
                                                  a.quantization is not None,
                                                  self.speculative_method if self.spec_tokens else None))

    @property
    def lora_left_out(self) -> str | None:
        """Why --enable-lora's slots are not in the budget for this model (None: they are, or no LoRA)."""
        return lora_not_modelled(self.model.arch) if self.lora is not None else None

    @property
    def mtp(self) -> bool:
        """An MTP drafter is loaded (weights, an attention layer in the KV plan)."""
        return self.spec_tokens > 0 and self.speculative_method == "mtp"

    @property
    def with_vision(self) -> bool:
        """vLLM loads (and profiles) the vision tower: a multimodal checkpoint without --language-model-only."""
        return self.model.arch.is_multimodal and not self.language_model_only

    @property
    def mamba_mode(self) -> str:
        """GDN state caching: 'align' with prefix caching (or by default in newer vLLM), else 'none'."""
        if not self.model.arch.is_hybrid:
            return "none"
        return "align" if self.enable_prefix_caching else self.rules.mamba_mode_default

    def speculative_config(self) -> str | None:
        """vLLM's --speculative-config JSON (compact, no spaces), or None."""
        if not self.spec_tokens:
            return None
        cfg: dict[str, Any] = {"method": self.speculative_method}
        if self.drafter is not None:  # a local drafter by its folder (vLLM loads that), a bundled one by its name
            cfg["model"] = self.draft_model or self.drafter.name
        cfg["num_speculative_tokens"] = self.spec_tokens
        for key in ("prompt_lookup_min", "prompt_lookup_max"):  # ngram's, kept where given
            if getattr(self, key) is not None:
                cfg[key] = getattr(self, key)
        return json.dumps(cfg, separators=(",", ":"))

    @property
    def kv_scale_bytes(self) -> int:
        """Bytes of per-token-head scale per KV head and token, for K and for V each (0: none)."""
        return KV_SCALE_BYTES.get(self.kv_cache_dtype, 0)

    def serve_flags(self, max_model_len: int) -> list[str]:
        """The `vllm serve` flags (vLLM's own names) that reproduce this deployment; the
        speculative-config JSON is one argument. The model argument is not included."""
        args = ["--gpu-memory-utilization", gmu_flag(self.gmu), "--max-model-len", str(max_model_len),
                "--max-num-seqs", str(self.max_num_seqs), "--max-num-batched-tokens", str(self.max_num_batched_tokens)]
        if self.kv_cache_dtype != "auto":
            args += ["--kv-cache-dtype", self.kv_cache_dtype]
        if self.dtype_flag != "auto":
            args += ["--dtype", self.dtype_flag]
        if self.enforce_eager:
            args.append("--enforce-eager")
        spec = self.speculative_config()
        if spec:
            args += ["--speculative-config", spec]
        if self.enable_prefix_caching:
            args.append("--enable-prefix-caching")
        if self.tp > 1:
            args += ["--tensor-parallel-size", str(self.tp)]
        if self.pp > 1:
            args += ["--pipeline-parallel-size", str(self.pp)]
        if self.dp > 1:
            args += ["--data-parallel-size", str(self.dp)]
        if (self.model.arch.is_multimodal or self.model.arch.extras.tower_unmodelled) and self.language_model_only:
            args.append("--language-model-only")
        elif self.mm_limits:
            args += ["--limit-mm-per-prompt", json.dumps(dict(self.mm_limits), separators=(",", ":"))]
        if self.mm_processor_kwargs and not self.language_model_only:
            args += ["--mm-processor-kwargs", self.mm_processor_kwargs]
        if self.attention_backend:
            args += ["--attention-backend", self.attention_backend]
        if self.gdn_prefill_backend and self.model.arch.gdn is not None:
            args += ["--gdn-prefill-backend", self.gdn_prefill_backend]
        if self.lora is not None:
            args.append("--enable-lora")
            if self.lora.max_loras != LoraSlots.max_loras:  # vLLM's defaults left out
                args += ["--max-loras", str(self.lora.max_loras)]
            if self.lora.max_rank != LoraSlots.max_rank:
                args += ["--max-lora-rank", str(self.lora.max_rank)]
            if self.lora.fully_sharded:
                args.append("--fully-sharded-loras")
        return args

    def inputs(self) -> dict[str, Any]:
        """Every resolved input, defaults included (for --json)."""
        return {
            "model": self.model.ref, "model_origin": self.model.origin, "gpu": self.gpu.name,
            "gpu_total_bytes": self.gpu.total_bytes, "vllm_version": self.rules.version,
            "vllm_version_modelled": self.version_label,
            "gpu_memory_utilization": self.gmu, "kv_cache_dtype": self.kv_cache_dtype,
            "dtype": self.model.arch.dtype, "dtype_flag": self.dtype_flag,
            "enforce_eager": self.enforce_eager, "num_speculative_tokens": self.spec_tokens,
            "speculative_method": self.speculative_method if self.spec_tokens else None,
            "drafter": self.drafter.name if self.drafter is not None else None,
            "max_num_seqs": self.max_num_seqs, "max_num_batched_tokens": self.max_num_batched_tokens,
            "max_model_len": self.max_model_len, "auto_fit_max_model_len": self.auto_fit,
            "max_model_len_given": self.max_model_len_given,
            "enable_prefix_caching": self.enable_prefix_caching, "mamba_cache_mode": self.mamba_mode,
            "tensor_parallel_size": self.tp, "compile_cache": self.compile_cache,
            "lora": None if self.lora is None else {"max_loras": self.lora.max_loras, "max_lora_rank": self.lora.max_rank,
                                                     "fully_sharded_loras": self.lora.fully_sharded},
            "language_model_only": self.language_model_only, "other_gpu_bytes": self.other_gpu_bytes,
            "free_at_start_bytes": self.free_at_start_bytes, "expandable_segments": self.expandable_segments,
            "flashinfer_workspace_bytes": self.flashinfer_workspace_bytes,
            **({"limit_mm_per_prompt": dict(self.mm_limits)} if self.mm_limits else {}),
            **({"mm_processor_kwargs": json.loads(self.mm_processor_kwargs)} if self.mm_processor_kwargs else {}),
        }

    def with_(self, **changes: Any) -> "Deployment":
        return replace(self, **changes)


def modalities_off(limits: tuple[tuple[str, int], ...]) -> frozenset[str]:
    """The modalities a --limit-mm-per-prompt (as (modality, items) pairs) sets to 0."""
    return frozenset(m for m, n in limits if n == 0)


# the SMs and the indexer's top-k FA3's split heuristic was read for (layers/sparse_mla.py SPARSE_FA3_SPLITS)
SPARSE_MLA_GRAPH_SMS = 132
SPARSE_MLA_GRAPH_TOPK = 2048

DTYPE_FLAGS = ("auto", "bfloat16", "float16", "half", "float32", "float")  # vLLM's --dtype choices (config ModelDType)


def serving_dtype(config_dtype: str, asked: str, compute_capability: str) -> str:
    """The dtype vLLM runs the model in (vLLM 0.20.2 config/model.py _get_and_verify_dtype / _resolve_auto_dtype and
    platforms/cuda.py supported_dtypes): --dtype as given; auto keeps the config's dtype, except that a float32 config
    runs in the GPU's preferred dtype (bfloat16 from compute capability 8.0, float16 before), as does a bfloat16
    config on a GPU without bfloat16 (vLLM warns and falls back)."""
    from .units import float_dtype

    if asked.lower() not in DTYPE_FLAGS:
        raise UserError(f"--dtype {asked!r} is not one vLLM takes; use one of {', '.join(DTYPE_FLAGS)}")
    bf16_ok = float(compute_capability or "0") >= 8.0
    if asked.lower() != "auto":
        if float_dtype(asked) == "bfloat16" and not bf16_ok:
            raise UserError(f"--dtype {asked}: bfloat16 needs compute capability 8.0 or later (this GPU: "
                            f"{compute_capability}); vLLM refuses it: use --dtype half")
        return float_dtype(asked)
    config = float_dtype(config_dtype)
    if config == "float32" or (config == "bfloat16" and not bf16_ok):
        return "bfloat16" if bf16_ok else "float16"  # the GPU's preferred dtype
    return config


def _speculative(a, flags: Flags):
    """(the DFlash drafter, its reference) for these speculative flags, or (None, None); what vLLM refuses, refused."""
    k = flags.num_speculative_tokens
    if k < 0:
        raise UserError("--mtp / num_speculative_tokens must be >= 0")
    if k and flags.speculative_method == "mtp" and not a.mtp_layers:
        raise UserError(f"{a.name} has no MTP head (mtp_num_hidden_layers = 0); drop --mtp")
    if k and flags.speculative_method not in SPEC_METHODS:
        raise UserError(f"speculative method {flags.speculative_method!r} is not modelled ({', '.join(SPEC_METHODS)})")
    if not (k and flags.speculative_method == "dflash"):
        return None, None
    from .model.drafter import bundled_drafters, load_drafter

    if not flags.draft_model:
        raise UserError("speculative method 'dflash' needs its drafter: add \"model\": NAME or a folder with its "
                        f"config.json to the speculative config (bundled: {', '.join(bundled_drafters())})")
    return load_drafter(flags.draft_model), drafter_reference(flags.draft_model)


def batch_defaults(gpu: GPU, rules: VllmRules) -> tuple[int, int]:
    """`vllm serve`'s default (max_num_batched_tokens, max_num_seqs) on this card. vLLM reads the total through NVML:
    a card NVML gives none for (GB10) gets the small ones."""
    big = (gpu.nvml_memory and gpu.total_bytes >= rules.big_gpu_threshold_gib * GiB
           and "A100" not in gpu.name.upper())
    huge = big and rules.huge_gpu_threshold_gib is not None and gpu.total_bytes >= rules.huge_gpu_threshold_gib * GiB
    return rules.serve_defaults_huge if huge else rules.serve_defaults_big if big else rules.serve_defaults_small


def _with_processor_kwargs(model: ModelSource, kwargs: str) -> ModelSource:
    """The model with its tower as vLLM profiles it under --mm-processor-kwargs (compact JSON)."""
    a = model.arch
    if a.vision is None:
        raise UserError(f"{a.name} has no vision tower this tool plans: --mm-processor-kwargs sizes a tower's "
                        "profiled items")
    return replace(model, arch=replace(a, vision=a.vision.with_processor_kwargs(json.loads(kwargs))))


def _prefix_lm_step_tokens(a, flags: Flags, tokens: int, off: frozenset[str], lmo: bool) -> int:
    """max_num_batched_tokens with a prefix LM's tower loaded: such a model never splits an item over steps
    (platforms/cuda.py: disable_chunked_mm_input), so one profiled item must fit a step: vLLM raises a defaulted
    value to it (engine/arg_utils.py) and refuses to start below a given one (said in one line)."""
    if lmo or a.vision is None or not a.vision.prefix_lm or tokens >= (item := a.vision.item_budget(off)):
        return tokens
    if flags.max_num_batched_tokens:
        what = next(m for m in (a.vision.profiled_modality, *a.vision.modalities) if m not in off)
        raise UserError(f"{a.name}: vLLM refuses to start: one profiled {what} ({item:,} tokens) is above "
                        f"--max-num-batched-tokens {tokens:,}, and with its tower this model never splits an item: "
                        f"give at least {item:,}, or turn the item off with --limit-mm-per-prompt")
    return item


def _check_parallel_and_backend(a, flags: Flags, kv: str) -> None:
    """The tensor-parallel split every layer kind checks for itself, the compile state, a forced attention backend
    against the KV dtype."""
    tp = flags.tensor_parallel_size
    if tp < 1:
        raise UserError(f"--tensor-parallel-size {tp}: give at least 1")
    # each layer kind says how its heads split over the ranks (attention heads and KV heads, GatedDeltaNet and
    # Mamba2 heads, MLA's heads): every split must be even
    for mixer in dict.fromkeys(layer.mixer for layer in a.layers if layer.mixer is not None):
        mixer.check_tp(tp, a.name)
    if flags.compile_cache not in COMPILE_STATES:
        raise UserError(f"--compile-cache {flags.compile_cache!r}: use one of {', '.join(COMPILE_STATES)}")
    if flags.attention_backend:
        from .hardware.facts import kv_readers

        readers, why = kv_readers(kv_backend_class(kv))
        if readers is not None and flags.attention_backend.upper() not in readers:
            raise UserError(f"--kv-cache-dtype {kv} with --attention-backend {flags.attention_backend.upper()}: vLLM "
                            f"reads that KV only with {' or '.join(readers)} ({why}); drop --attention-backend or "
                            "pick one of those")


def resolve(model: ModelSource, gpu: GPU, rules: VllmRules, flags: Flags) -> Deployment:
    """Fill in vLLM's defaults for this GPU and version; reject what vLLM would reject."""
    a = model.arch
    dtype = serving_dtype(a.dtype, flags.dtype, gpu.compute_capability)
    if dtype != a.dtype:
        a = replace(a, dtype=dtype)
        model = replace(model, arch=a)
    gmu = rules.default_gmu if flags.gpu_memory_utilization is None else flags.gpu_memory_utilization
    if not 0 < gmu <= 1:
        raise UserError(f"--gpu-memory-utilization must be in (0, 1], got {gmu}")
    kv = flags.kv_cache_dtype.lower()
    if kv not in KV_DTYPES:
        raise UserError(f"--kv-cache-dtype {flags.kv_cache_dtype!r} is not modelled; use one of {', '.join(KV_DTYPES)}")
    from .units import dtype_bytes

    kv_bytes = KV_DTYPES[kv] or dtype_bytes(a.dtype)
    k = flags.num_speculative_tokens
    drafter, draft_ref = _speculative(a, flags)
    d_tokens, d_seqs = batch_defaults(gpu, rules)
    auto_fit = flags.max_model_len == -1
    mml = a.max_position_embeddings if flags.max_model_len in (None, -1) else flags.max_model_len
    if mml <= 0:
        raise UserError("--max-model-len must be positive (or auto)")
    if mml > a.max_position_embeddings and not flags.allow_long_max_model_len:
        raise UserError(f"--max-model-len {mml:,} is above {a.name}'s {a.max_position_embeddings:,} "
                        "(max_position_embeddings), which vLLM refuses unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 is set; "
                        f"give at most {a.max_position_embeddings:,}")
    # vLLM's _set_default_max_num_seqs_and_batched_tokens_args (engine/arg_utils.py, 0.19.1-0.33.0): a defaulted
    # max_num_batched_tokens is capped at max_num_seqs x max_model_len, then a defaulted max_num_seqs at it
    tokens = flags.max_num_batched_tokens or min(d_tokens, (flags.max_num_seqs or d_seqs) * mml)
    seqs = flags.max_num_seqs or min(d_seqs, tokens)
    tp = flags.tensor_parallel_size
    _check_parallel_and_backend(a, flags, kv)
    # a tower this tool plans defaults to --language-model-only (said in the answer); one it does not model defaults to
    # vLLM's own default, loading it, which is refused below until --language-model-only is given
    lmo = (a.is_multimodal and not a.extras.tower_unmodelled) if flags.language_model_only is None \
        else flags.language_model_only
    off = modalities_off(flags.limit_mm_per_prompt)
    if flags.mm_processor_kwargs and not lmo:
        model = _with_processor_kwargs(model, flags.mm_processor_kwargs)
        a = model.arch
    if a.vision is not None and set(a.vision.modalities) <= off:
        lmo = True  # every modality of the tower at 0: vLLM skips it as --language-model-only does
    elif not lmo and a.vision is not None and a.vision.profiled_modality in off and not a.vision.profiles_without(off):
        raise UserError(f"{a.name}: --limit-mm-per-prompt turns off the {a.vision.profiled_modality} vLLM profiles its "
                        f"{a.vision.name} tower with; its profile with the other items is not modelled")
    if a.extras.tower_unmodelled and not lmo:
        raise UserError(f"{a.name}: {a.extras.tower_unmodelled} is not modelled, and vLLM loads it unless told otherwise: "
                        "pass --language-model-only to plan the text model (vLLM then serves text only)")
    if a.uses_sparse_mla and not rules.sparse_mla:
        raise UserError(f"{a.name}: sparse MLA (DeepSeek V3.2 / GLM-5) is modelled from vLLM 0.33's source and "
                        f"measured there, not on vLLM {rules.version}: pass --vllm-version 0.33")
    if a.uses_sparse_mla and not flags.enforce_eager and (gpu.sms != SPARSE_MLA_GRAPH_SMS
                                                          or a.mla.index_topk != SPARSE_MLA_GRAPH_TOPK):
        raise UserError(f"{a.name}: sparse MLA under CUDA graphs is modelled on {SPARSE_MLA_GRAPH_SMS}-SM Hopper cards "
                        f"(H100 SXM, H200) with an index_topk of {SPARSE_MLA_GRAPH_TOPK} (FA3's split count depends on "
                        f"both), not {gpu.name}: pass --enforce-eager")
    if not lmo and a.vision is not None and a.vision.traced and a.vision.name not in rules.traced_towers:
        raise UserError(f"{a.name}: its {a.vision.name} tower's profiling is traced in vLLM 0.33's source and measured "
                        f"there, not on vLLM {rules.version}: pass --language-model-only or --vllm-version 0.33")
    if not lmo and a.vision is not None and a.vision.prefix_lm and rules.mm_prefix_backend is None:
        raise UserError(f"{a.name}: with its {a.vision.name} tower vLLM {rules.version} picks another attention backend "
                        "(a multimodal prefix LM), measured on vLLM 0.33 only: pass --language-model-only or --vllm-version 0.33")
    tokens = _prefix_lm_step_tokens(a, flags, tokens, off, lmo)
    defaults = [Defaulted(flag, text) for flag, given, text in (
        ("gpu_memory_utilization", flags.gpu_memory_utilization, f"GMU {gmu:.2f}"),
        ("max_num_seqs", flags.max_num_seqs, f"max_num_seqs {seqs}"),
        ("max_num_batched_tokens", flags.max_num_batched_tokens, f"max_num_batched_tokens {tokens}"),
        ("kv_cache_dtype", None if kv == "auto" else kv, f"KV cache in {a.dtype}"),
        ("max_model_len", flags.max_model_len, f"max_model_len {mml:,} (the model's maximum)")) if given is None]
    return Deployment(model, gpu, rules, gmu, kv, kv_bytes, flags.enforce_eager, k, seqs, tokens, mml, auto_fit,
                      flags.max_model_len is not None, flags.enable_prefix_caching, tp, flags.compile_cache, lmo,
                      flags.other_gpu_bytes, flags.speculative_method if k else "mtp", tuple(defaults),
                      flags.attention_backend.upper() if flags.attention_backend else None, drafter=drafter,
                      free_at_start_bytes=flags.free_at_start_bytes, expandable_segments=flags.expandable_segments,
                      flashinfer_workspace_bytes=flags.flashinfer_workspace_bytes, dtype_flag=flags.dtype.lower(),
                      lora=flags.lora, max_num_seqs_given=flags.max_num_seqs is not None,
                      gdn_prefill_backend=flags.gdn_prefill_backend, draft_model=draft_ref,
                      prompt_lookup_min=flags.prompt_lookup_min, prompt_lookup_max=flags.prompt_lookup_max,
                      mm_limits=flags.limit_mm_per_prompt, mm_processor_kwargs=flags.mm_processor_kwargs)
