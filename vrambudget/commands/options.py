"""The deployment options shared by predict, table, plan, serve-cmd and probe, defined once.

A vLLM flag the tool models is one `DeploymentOptions` field plus one `OPTIONS` entry here: every command
decorated with `deployment_command` gets it, under vLLM's own name, and `DeploymentOptions.build` turns the
options into a resolved `Deployment` and its coefficients. A command that means something else by a shared
flag (table's `--mtp` is the MTP columns' K) leaves it out with `exclude` and declares its own.
"""

from dataclasses import dataclass, fields
from typing import Any, Callable, Optional

from .common import Exit
from .spec import Opt, parse

P = "vLLM flags"


@dataclass(frozen=True)
class DeploymentOptions:
    """The options as the user typed them (None: vLLM's default for the GPU and version)."""

    model: Optional[str] = None
    gpu: Optional[str] = None
    gpu_memory: Optional[str] = None
    gmu: Optional[float] = None
    kv_cache_dtype: str = "auto"
    dtype: str = "auto"
    enforce_eager: bool = False
    mtp: Optional[int] = None
    speculative_config: Optional[str] = None
    max_num_seqs: Optional[int] = None
    max_num_batched_tokens: Optional[int] = None
    max_model_len: Optional[str] = None
    enable_prefix_caching: bool = False
    tensor_parallel_size: int = 1
    compile_cache: str = "cold"
    language_model_only: Optional[bool] = None
    limit_mm_per_prompt: Optional[str] = None
    mm_processor_kwargs: Optional[str] = None
    vllm_version: Optional[str] = None
    other_gpu_usage: Optional[str] = None
    attention_backend: Optional[str] = None
    gdn_prefill_backend: Optional[str] = None
    free_memory: Optional[str] = None
    simulated_on: Optional[str] = None
    enable_lora: bool = False
    max_loras: Optional[int] = None
    max_lora_rank: Optional[int] = None
    pipeline_parallel_size: int = 1
    data_parallel_size: int = 1
    enable_expert_parallel: bool = False
    nodes: int = 1

    def with_(self, **changes: Any) -> "DeploymentOptions":
        from dataclasses import replace

        return replace(self, **changes)

    def defaulted(self) -> tuple[str, ...]:
        """The choices the user left to vrambudget's defaults (said on the answer's first line)."""
        return tuple(k for k in ("model", "gpu") if getattr(self, k) is None
                     and not (k == "gpu" and self.gpu_memory))

    def build(self):
        """(Deployment, Coefficients) for these options; a UserError names what is wrong."""
        return build(self)


# the shared options, as data (commands/spec.py): the order is the order --help lists them in
OPTIONS: dict[str, Opt] = {o.name: o for o in (
    Opt("model", ("--model", "-m"), str, None, "Bundled profile name (see `vrambudget models`), a local model folder, "
        "or a Hugging Face id. Default: qwen3.5-9b-awq."),
    Opt("gpu", ("--gpu", "-g"), str, None, "GPU from the catalog (`vrambudget gpus`), or 'auto' to read the local one "
        "through NVML. Default: rtx4060ti."),
    Opt("gpu_memory", ("--gpu-memory",), str, None, "Total GPU memory for a GPU not in the catalog, e.g. 23.5GiB (as "
        "CUDA reports it)."),
    Opt("gmu", ("--gpu-memory-utilization", "--gmu"), float, None, "Fraction of the GPU vLLM may use (default: "
        "vLLM's, 0.9 in 0.20, 0.92 in 0.26 and later).", panel=P),
    Opt("kv_cache_dtype", ("--kv-cache-dtype",), str, "auto", "auto | fp8 | fp8_e4m3 | fp8_e5m2 | bfloat16 | "
        "int8_per_token_head | fp8_per_token_head (per-token-head KV: 1 byte + an fp32 scale per head and token; "
        "Triton attention).", panel=P),
    Opt("dtype", ("--dtype",), str, "auto", "auto | bfloat16 | float16 | half | float32: the weights' and "
        "activations' dtype. auto: the config's; a float32 config runs in bfloat16 (float16 before Ampere), as vLLM "
        "resolves it.", panel=P),
    Opt("enforce_eager", ("--enforce-eager",), bool, False, "No CUDA graphs / torch.compile.", off="--cuda-graphs",
        panel=P),
    Opt("mtp", ("--mtp",), int, None, "MTP speculative decoding with K tokens (a bare --mtp means K=2; 0 = off).",
        min=0, max=8, panel=P),
    Opt("speculative_config", ("--speculative-config",), str, None, 'vLLM\'s JSON, e.g. '
        '\'{"method":"mtp","num_speculative_tokens":2}\'; a DFlash drafter: \'{"method":"dflash","model":'
        '"qwen3.6-27b-dflash","num_speculative_tokens":15}\' (a bundled drafter or a folder with its config.json).',
        panel=P),
    Opt("max_num_seqs", ("--max-num-seqs",), int, None, "Default: vLLM's for the GPU (256 below 70 GiB, 1024 above).",
        min=1, panel=P),
    Opt("max_num_batched_tokens", ("--max-num-batched-tokens",), int, None, "Default: vLLM's for the GPU (2048 below "
        "70 GiB, 8192 above).", min=1, panel=P),
    Opt("max_model_len", ("--max-model-len",), str, None, "Context length (32768, 128k), or auto / -1 to let vLLM "
        "fit it. Default: the model's maximum.", panel=P),
    Opt("enable_prefix_caching", ("--enable-prefix-caching",), bool, False, "", off="--no-enable-prefix-caching",
        panel=P),
    Opt("tensor_parallel_size", ("--tensor-parallel-size", "-tp"), int, 1, "Budget per rank.", min=1, panel=P),
    Opt("pipeline_parallel_size", ("--pipeline-parallel-size", "-pp"), int, 1, "Pipeline stages: one budget per "
        "stage, the worst decides (VLLM_PP_LAYER_PARTITION is read).",
        min=1, panel=P),
    Opt("data_parallel_size", ("--data-parallel-size", "-dp"), int, 1, "Data-parallel engines, each planned alone "
        "(dense models).", min=1, panel=P),
    Opt("enable_expert_parallel", ("--enable-expert-parallel",), bool, False, "Expert parallel: whole experts per "
        "rank (an even split; an uneven one is refused).", panel=P),
    Opt("nodes", ("--nodes",), int, 1, "Hosts the workers are spread over (vLLM's --nnodes): each worker is "
        "planned on its own card; a --gpu list of this many cards gives each host's card.", min=1, panel=P),
    Opt("compile_cache", ("--compile-cache",), str, "cold", "cold: first boot of this graph (larger profiling peak); "
        "warm: compiled before and the Triton kernel cache kept; warm-jit: compiled before, but the Triton cache is "
        "gone (a container without a persisted ~/.triton: kernels JIT-compile inside the profile); fresh: the first "
        "boot on this machine or after an upgrade.", panel=P),
    Opt("language_model_only", ("--language-model-only",), bool, None, "Skip the vision tower of a multimodal "
        "checkpoint (default: on).", off="--with-vision", panel=P),
    Opt("limit_mm_per_prompt", ("--limit-mm-per-prompt",), str, None, "vLLM's items a prompt may hold, as JSON, e.g. "
        "'{\"video\": 0}': a modality at 0 is not profiled (Qwen2.5-VL then profiles its tower with an image, not a "
        "video); every one at 0 is --language-model-only.", panel=P),
    Opt("mm_processor_kwargs", ("--mm-processor-kwargs",), str, None, "vLLM's processor options, as JSON, that size "
        "the items the tower is profiled with: max_pixels for Qwen2.5-VL / Qwen3-VL, do_pan_and_scan (and "
        "pan_and_scan_max_num_crops) for Gemma 3; others are refused.", panel=P),
    Opt("vllm_version", ("--vllm-version",), str, None, "The vLLM you run, e.g. 0.20.2 (0.20.x and 0.26.x "
        "measured, 0.33.x too; 0.10-0.19 planned as 0.19 with 0.20's coefficients; 0.27-0.32 from source; others with the "
        "nearest older rules and a warning). "
        "Default: the vLLM installed here (its package metadata), else the newest modelled."),
    Opt("other_gpu_usage", ("--other-gpu-usage",), str, None, "Memory other processes hold on the GPU, e.g. 0.6GiB."),
    Opt("attention_backend", ("--attention-backend",), str, None, "vLLM's --attention-backend, when you force one: "
        "FLASH_ATTN, FLASHINFER or TRITON_ATTN (default: the one vLLM picks on this GPU for this KV dtype).",
        panel=P),
    Opt("gdn_prefill_backend", ("--gdn-prefill-backend",), str, None, "vLLM's --gdn-prefill-backend for GatedDeltaNet "
        "hybrids (Qwen3.5/3.6/3.8, Qwen3-Next): triton or flashinfer (default: FlashInfer on Hopper, Triton "
        "elsewhere); with prefix caching FlashInfer's kernel keeps block-aligned state checkpoints (blocks a "
        "multiple of 64 tokens and one more state block a request, vLLM 0.33).", panel=P),
    Opt("free_memory", ("--free-memory",), str, None, "The free memory vLLM sees at start where you know it, e.g. "
        "15.56GiB (its log's 'Free memory on device (X/Y GiB) on startup'): replaces the CUDA-context estimate."),
    Opt("enable_lora", ("--enable-lora",), bool, False, "LoRA adapters: vLLM allocates --max-loras slots of rank "
        "--max-lora-rank for every linear layer as it loads (dense models).", panel=P),
    Opt("max_loras", ("--max-loras",), int, None, "LoRA slots on the GPU (vLLM's default 1; needs --enable-lora).",
        min=1, panel=P),
    Opt("max_lora_rank", ("--max-lora-rank",), int, None, "The largest LoRA rank served (vLLM's default 16; needs "
        "--enable-lora).", min=1, panel=P),
    Opt("simulated_on", ("--simulated-on",), str, None, "Plan the --gpu card as `probe --simulate-gpu` measures it on "
        "this bigger GPU (e.g. h100): that chip's architecture, kernels and CUDA context with the card's memory."),
)}
assert set(OPTIONS) == {f.name for f in fields(DeploymentOptions)}, "every option is a DeploymentOptions field"


def _with_default(o: Opt, defaults: dict[str, Any]) -> Opt:
    """`o` with a command's own default, its help's 'Default: ...' sentence dropped (typer shows the new one)."""
    if o.name not in defaults:
        return o
    from dataclasses import replace

    return replace(o, default=defaults[o.name], help=o.help.split(" Default: ")[0])


def deployment_command(app: Any, name: str | None = None, *, exclude: tuple[str, ...] = (),
                       defaults: dict[str, Any] | None = None,
                       own: tuple[Opt, ...] = ()) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Register `fn(opts: DeploymentOptions, **own)` as a typer command taking its own parameters (typer-annotated in
    its signature, or `own` as data) and every shared option (less `exclude`; `defaults` overrides a shared
    default, e.g. probe's --gpu auto). Exit codes raised as commands.common.Exit become typer's."""
    import inspect

    import typer

    defaults = defaults or {}

    def register(fn: Callable[..., None]) -> Callable[..., None]:
        declared = [p for p in inspect.signature(fn, eval_str=True).parameters.values()
                    if p.name != "opts" and p.kind != inspect.Parameter.VAR_KEYWORD]
        from_data = [inspect.Parameter(o.name, inspect.Parameter.KEYWORD_ONLY, annotation=o.typer_param()[0],
                                       default=o.default) for o in own]
        mine = declared + from_data
        names = {p.name for p in mine}
        shared = [inspect.Parameter(k, inspect.Parameter.KEYWORD_ONLY, annotation=o.typer_param()[0],
                                    default=o.default)
                  for k, o in ((k, _with_default(o, defaults)) for k, o in OPTIONS.items())
                  if k not in exclude and k not in names]

        def command(**kwargs: Any) -> None:
            opts = DeploymentOptions(**{k: kwargs.pop(k) for k in list(kwargs) if k in OPTIONS and k not in names})
            try:
                fn(opts, **kwargs)
            except Exit as e:
                raise typer.Exit(e.code) from None

        command.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
            shared + [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in mine])
        command.__doc__, command.__name__ = fn.__doc__, fn.__name__
        command.__annotations__ = {}
        app.command(name)(command)
        return fn

    return register


def fast_options(argv: list[str], own: tuple[Opt, ...], exclude: tuple[str, ...] = ()) -> tuple[DeploymentOptions, dict[str, Any]] | None:
    """The fast path (commands/spec.py): (options, the command's own values) for a plainly valid argv, else None."""
    specs = [o for k, o in OPTIONS.items() if k not in exclude and k not in {x.name for x in own}] + list(own)
    values = parse(argv, specs)
    if values is None:
        return None
    shared = {k: v for k, v in values.items() if k in OPTIONS and k not in {x.name for x in own}}
    return DeploymentOptions(**shared), {k: v for k, v in values.items() if k not in shared}


def environment(env: dict[str, str] | None = None) -> dict[str, Any]:
    """What vLLM reads from the environment that changes the plan: PYTORCH_CUDA_ALLOC_CONF's expandable_segments,
    VLLM_FLASHINFER_WORKSPACE_BUFFER_SIZE (bytes) and VLLM_ALLOW_LONG_MAX_MODEL_LEN, as Flags fields; a malformed
    value is a one-line error."""
    import os

    from ..errors import UserError

    env = os.environ if env is None else env
    out: dict[str, Any] = {}
    conf = env.get("PYTORCH_CUDA_ALLOC_CONF", "").strip()
    if conf:
        for item in conf.split(","):
            key, sep, value = item.partition(":")
            if not sep or not key.strip() or not value.strip():
                raise UserError(f"PYTORCH_CUDA_ALLOC_CONF={conf!r}: each setting is key:value, comma-separated "
                                "(e.g. expandable_segments:True); fix or unset it")
            if key.strip() == "expandable_segments":
                if value.strip() not in ("True", "False"):
                    raise UserError(f"PYTORCH_CUDA_ALLOC_CONF expandable_segments:{value.strip()}: PyTorch takes True "
                                    "or False")
                out["expandable_segments"] = value.strip() == "True"
    size = env.get("VLLM_FLASHINFER_WORKSPACE_BUFFER_SIZE", "").strip()
    if size:
        if not size.isdigit() or int(size) <= 0:
            raise UserError(f"VLLM_FLASHINFER_WORKSPACE_BUFFER_SIZE={size!r}: vLLM reads a whole number of bytes "
                            "(e.g. 268435456 for 256 MiB); fix or unset it")
        out["flashinfer_workspace_bytes"] = int(size)
    allow = env.get("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "").strip().lower()
    if allow:
        if allow not in ("1", "true", "0", "false"):
            raise UserError(f"VLLM_ALLOW_LONG_MAX_MODEL_LEN={allow!r}: vLLM reads 1 or true as on and anything else "
                            "as off; write 1 or 0")
        out["allow_long_max_model_len"] = allow in ("1", "true")
    return out


def build(o: DeploymentOptions):
    """Resolve the options into (Deployment, Coefficients): vLLM's defaults filled in for the GPU and version."""
    import os

    from ..coefficients import load
    from ..deployment import resolve
    from ..model.checkpoint import resolve_model
    from ..vllm_rules import choose_version

    flags = _flags(o)
    src = resolve_model(o.model)
    gpu, cards = _cards(o, flags)
    choice = choose_version(o.vllm_version)
    if o.nodes > 1:
        cards = node_cards(o, cards)
    d = resolve(src, gpu, choice.rules, flags).with_(vllm=choice, pp=o.pipeline_parallel_size,
                                                     dp=o.data_parallel_size, expert_parallel=o.enable_expert_parallel,
                                                     gpus=cards, nodes=o.nodes,
                                                     pp_partition=os.environ.get("VLLM_PP_LAYER_PARTITION") or None)
    _check_experts(d)
    return d, load(choice.rules.version, gpu.key, src.ref)


def _flags(o: DeploymentOptions):
    """The vLLM flags as `Flags`, each checked (and the environment values vLLM reads)."""
    from dataclasses import replace

    from ..deployment import Flags, ngram_lookup, parse_speculative_config
    from ..errors import UserError
    from ..hardware.facts import known_backends
    from ..model.lora import LoraSlots
    from ..units import parse_size, parse_tokens

    for name, opt in OPTIONS.items():  # `--gpu ""` (an unset shell variable) is a mistake, not the default
        value = getattr(o, name)
        if opt.type is str and value is not None and not str(value).strip():
            raise UserError(f"{opt.flags[0]} is empty: give a value or leave the option out")
    if o.speculative_config and o.mtp is not None:
        raise UserError("--mtp and --speculative-config both set speculative decoding: give one")
    method, k, draft, lookup = "mtp", 0, None, {}
    if o.speculative_config:
        method, k, draft = parse_speculative_config(o.speculative_config)
        lookup = ngram_lookup(o.speculative_config)  # ngram's prompt_lookup_min / _max, kept for serve-cmd
    if o.mtp is not None:
        method, k = "mtp", o.mtp
    mml: int | None = None
    if o.max_model_len is not None:
        mml = -1 if str(o.max_model_len).lower() in ("auto", "-1") else parse_tokens(o.max_model_len, "--max-model-len")
    if not o.enable_lora and (o.max_loras or o.max_lora_rank):
        raise UserError("--max-loras / --max-lora-rank size LoRA slots: add --enable-lora (vLLM ignores them without)")
    lora = LoraSlots(o.max_loras or LoraSlots.max_loras, o.max_lora_rank or LoraSlots.max_rank) if o.enable_lora else None
    backend = o.attention_backend.upper() if o.attention_backend else None
    if backend and backend not in known_backends():
        raise UserError(f"--attention-backend {o.attention_backend!r} is not modelled; use one of "
                        f"{', '.join(known_backends())}")
    gdn = o.gdn_prefill_backend.lower() if o.gdn_prefill_backend else None
    if gdn and gdn not in ("triton", "flashinfer"):
        raise UserError(f"--gdn-prefill-backend {o.gdn_prefill_backend!r}: vLLM takes triton or flashinfer")
    flags = Flags(gpu_memory_utilization=o.gmu, kv_cache_dtype=o.kv_cache_dtype, dtype=o.dtype,
                  enforce_eager=o.enforce_eager,
                  num_speculative_tokens=k, speculative_method=method, max_num_seqs=o.max_num_seqs,
                  max_num_batched_tokens=o.max_num_batched_tokens, max_model_len=mml,
                  enable_prefix_caching=o.enable_prefix_caching, tensor_parallel_size=o.tensor_parallel_size,
                  compile_cache=o.compile_cache, language_model_only=o.language_model_only,
                  limit_mm_per_prompt=_limits(o.limit_mm_per_prompt),
                  mm_processor_kwargs=_processor_kwargs(o.mm_processor_kwargs),
                  other_gpu_bytes=parse_size(o.other_gpu_usage, "--other-gpu-usage") if o.other_gpu_usage else 0,
                  attention_backend=backend, gdn_prefill_backend=gdn, draft_model=draft, lora=lora,
                  free_at_start_bytes=parse_size(o.free_memory, "--free-memory") if o.free_memory else None,
                  **lookup)
    return replace(flags, **environment())


def _processor_kwargs(text: str | None) -> str:
    """--mm-processor-kwargs's JSON, compact (logparse.processor_kwargs; a bad one: one line)."""
    from ..logparse import processor_kwargs

    return processor_kwargs(text)


def _limits(text: str | None) -> tuple[tuple[str, int], ...]:
    """--limit-mm-per-prompt's JSON as (modality, items) pairs (vLLM's own format; a bad one: one line)."""
    if not text:
        return ()
    from ..logparse import json_object, mm_limits

    return mm_limits(json_object(text, "--limit-mm-per-prompt", " of items per modality", '{"video": 0}'))


def _cards(o: DeploymentOptions, flags) -> tuple:
    """(the card the budget is made on, one card per rank where --gpu lists several)."""
    from ..errors import UserError
    from ..hardware import catalog

    cards: tuple = ()
    if o.gpu and "," in o.gpu:  # one card per rank (parallel.ranks says how many)
        from ..parallel import gpu_list

        cards = tuple(gpu_list(o.gpu, catalog.lookup))
    gpu = cards[0] if cards else catalog.resolve(o.gpu, o.gpu_memory)
    if o.simulated_on:
        gpu = catalog.simulated(gpu, catalog.lookup(o.simulated_on), f"--simulated-on {o.simulated_on}")
    for flag, held in (("--other-gpu-usage", flags.other_gpu_bytes), ("--free-memory", flags.free_at_start_bytes)):
        if held and held >= gpu.total_bytes:
            raise UserError(f"{flag} {held / 2**30:.2f} GiB is not below {gpu.name}'s {gpu.total_gib:.2f} GiB; "
                            "give what the GPU reports (nvidia-smi)")
    return gpu, cards


def _check_experts(d) -> None:
    """Data and expert parallel over a mixture of experts: what is modelled."""
    from ..errors import UserError

    moe = d.model.arch.moe
    if moe is not None and d.dp > 1:
        raise UserError("data parallel on a mixture-of-experts model: vLLM spreads the experts over TP x DP ranks, "
                        "which is not modelled yet")
    if moe is not None and d.expert_parallel and moe.num_experts % d.tp:
        raise UserError(f"--enable-expert-parallel: {moe.num_experts} experts over {d.tp} ranks leave some ranks "
                        "one more expert, which is not modelled (an even split is: the same bytes as TP's)")
    if d.expert_parallel and d.model.arch.moe is None:
        raise UserError(f"--enable-expert-parallel: {d.model.ref} has no experts")


def node_cards(o: DeploymentOptions, cards: tuple) -> tuple:
    """The cards of one engine's workers over `o.nodes` hosts (vLLM places world ranks in order, a host's share
    each: config/parallel.py local_world_size); a --gpu list of one card per host becomes one per worker."""
    from ..errors import UserError

    world = o.tensor_parallel_size * o.pipeline_parallel_size * o.data_parallel_size
    if world % o.nodes:
        raise UserError(f"--nodes {o.nodes}: vLLM needs the {world} workers (TP x PP x DP) to divide evenly over the "
                        "hosts")
    if len(cards) != o.nodes:
        return cards
    if o.data_parallel_size > 1 and len({c.key for c in cards}) > 1:
        raise UserError("--nodes with data parallel over hosts of different cards: each engine would plan its own "
                        "cards, which is not modelled; plan each host's engine alone")
    per_host, engine = world // o.nodes, o.tensor_parallel_size * o.pipeline_parallel_size
    return tuple(cards[w // per_host] for w in range(engine))


# options more than one command declares
JSON = Opt("json_out", ("--json",), bool, False, "One JSON object on stdout, for scripts.")
PLOT = Opt("plot", ("--plot",), str, None, "Also draw the picture to this PNG (needs the 'notebook' extra: matplotlib).")
TARGET = Opt("target_context", ("--target-context",), str, None, "Find the smallest GMU at which this many tokens "
             "start (65536, 64k).")
