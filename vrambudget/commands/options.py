"""The deployment options shared by predict, table, plan, serve-cmd and probe, defined once.

A vLLM flag the tool models is one `DeploymentOptions` field plus one `OPTIONS` entry here: every command
decorated with `deployment_command` gets it, under vLLM's own name, and `DeploymentOptions.build` turns the
options into a resolved `Deployment` and its coefficients. A command that means something else by a shared
flag (table's `--mtp` is the MTP columns' K) leaves it out with `exclude` and declares its own.
"""

import inspect
from dataclasses import dataclass, fields
from typing import Annotated, Any, Callable, Optional

import typer

P = "vLLM flags"


@dataclass(frozen=True)
class DeploymentOptions:
    """The options as the user typed them (None: vLLM's default for the GPU and version)."""

    model: Optional[str] = None
    gpu: Optional[str] = None
    gpu_memory: Optional[str] = None
    gmu: Optional[float] = None
    kv_cache_dtype: str = "auto"
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
    vllm_version: Optional[str] = None
    other_gpu_usage: Optional[str] = None
    attention_backend: Optional[str] = None
    free_memory: Optional[str] = None
    simulated_on: Optional[str] = None

    def with_(self, **changes: Any) -> "DeploymentOptions":
        from dataclasses import replace

        return replace(self, **changes)

    def build(self):
        """(Deployment, Coefficients) for these options; a UserError names what is wrong."""
        return build(self)


# name -> (type with its typer.Option, default); the order is the order --help lists them in
OPTIONS: dict[str, tuple[Any, Any]] = {
    "model": (Annotated[Optional[str], typer.Option(
        "--model", "-m", help="Bundled profile name (see `vrambudget models`), a local model folder, or a Hugging Face "
        "id. Default: qwen3.5-9b-awq.")], None),
    "gpu": (Annotated[Optional[str], typer.Option(
        "--gpu", "-g", help="GPU from the catalog (`vrambudget gpus`), or 'auto' to read the local one through NVML. "
        "Default: rtx4060ti.")], None),
    "gpu_memory": (Annotated[Optional[str], typer.Option(
        "--gpu-memory", help="Total GPU memory for a GPU not in the catalog, e.g. 23.5GiB (as CUDA reports it).")],
        None),
    "gmu": (Annotated[Optional[float], typer.Option(
        "--gpu-memory-utilization", "--gmu", rich_help_panel=P,
        help="Fraction of the GPU vLLM may use (default: vLLM's, 0.9 in 0.20, 0.92 in 0.26 and later).")], None),
    "kv_cache_dtype": (Annotated[str, typer.Option(
        "--kv-cache-dtype", rich_help_panel=P, help="auto | fp8 | fp8_e4m3 | fp8_e5m2 | bfloat16 | "
        "int8_per_token_head | fp8_per_token_head (per-token-head KV: 1 byte + an fp32 scale per head and token; "
        "Triton attention).")], "auto"),
    "enforce_eager": (Annotated[bool, typer.Option(
        "--enforce-eager/--cuda-graphs", rich_help_panel=P, help="No CUDA graphs / torch.compile.")], False),
    "mtp": (Annotated[Optional[int], typer.Option(
        "--mtp", rich_help_panel=P, min=0, max=8,
        help="MTP speculative decoding with K tokens (a bare --mtp means K=2; 0 = off).")], None),
    "speculative_config": (Annotated[Optional[str], typer.Option(
        "--speculative-config", rich_help_panel=P,
        help='vLLM\'s JSON, e.g. \'{"method":"mtp","num_speculative_tokens":2}\'; a DFlash drafter: '
             '\'{"method":"dflash","model":"qwen3.6-27b-dflash","num_speculative_tokens":15}\' (a bundled drafter '
             'or a folder with its config.json).')], None),
    "max_num_seqs": (Annotated[Optional[int], typer.Option(
        "--max-num-seqs", rich_help_panel=P, min=1,
        help="Default: vLLM's for the GPU (256 below 70 GiB, 1024 above).")], None),
    "max_num_batched_tokens": (Annotated[Optional[int], typer.Option(
        "--max-num-batched-tokens", rich_help_panel=P, min=1,
        help="Default: vLLM's for the GPU (2048 below 70 GiB, 8192 above).")], None),
    "max_model_len": (Annotated[Optional[str], typer.Option(
        "--max-model-len", rich_help_panel=P,
        help="Context length (32768, 128k), or auto / -1 to let vLLM fit it. Default: the model's maximum.")], None),
    "enable_prefix_caching": (Annotated[bool, typer.Option(
        "--enable-prefix-caching/--no-enable-prefix-caching", rich_help_panel=P)], False),
    "tensor_parallel_size": (Annotated[int, typer.Option(
        "--tensor-parallel-size", "-tp", rich_help_panel=P, min=1, help="Budget per rank.")], 1),
    "compile_cache": (Annotated[str, typer.Option(
        "--compile-cache", rich_help_panel=P,
        help="cold: first boot of this graph (larger profiling peak); warm: compiled before; fresh: the first boot "
             "on this machine or after an upgrade (Triton kernels JIT-compile inside the profile).")], "cold"),
    "language_model_only": (Annotated[Optional[bool], typer.Option(
        "--language-model-only/--with-vision", rich_help_panel=P,
        help="Skip the vision tower of a multimodal checkpoint (default: on).")], None),
    "vllm_version": (Annotated[Optional[str], typer.Option(
        "--vllm-version", help="The vLLM you run, e.g. 0.20.2 (modelled: 0.19, 0.20.x and 0.26.x measured, 0.33.x "
        "from source; others are planned with the nearest older rules and a warning). Default: the vLLM installed "
        "here (its package metadata), else the newest modelled.")], None),
    "other_gpu_usage": (Annotated[Optional[str], typer.Option(
        "--other-gpu-usage", help="Memory other processes hold on the GPU, e.g. 0.6GiB.")], None),
    "attention_backend": (Annotated[Optional[str], typer.Option(
        "--attention-backend", rich_help_panel=P, help="vLLM's --attention-backend, when you force one: FLASH_ATTN, "
        "FLASHINFER or TRITON_ATTN (default: the one vLLM picks on this GPU for this KV dtype).")], None),
    "free_memory": (Annotated[Optional[str], typer.Option(
        "--free-memory", help="The free memory vLLM sees at start where you know it, e.g. 15.56GiB (its log's 'Free "
        "memory on device (X/Y GiB) on startup'): replaces the CUDA-context estimate.")], None),
    "simulated_on": (Annotated[Optional[str], typer.Option(
        "--simulated-on", help="Plan the --gpu card as `probe --simulate-gpu` measures it on this bigger GPU (e.g. "
        "h100): that chip's architecture, kernels and CUDA context with the card's memory.")], None),
}
assert set(OPTIONS) == {f.name for f in fields(DeploymentOptions)}, "every option is a DeploymentOptions field"


def deployment_command(app: typer.Typer, name: str | None = None, *, exclude: tuple[str, ...] = (),
                       defaults: dict[str, Any] | None = None) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Register `fn(opts: DeploymentOptions, **own)` as a command taking its own parameters and every shared
    option (less `exclude`; `defaults` overrides a shared default, e.g. probe's --gpu auto)."""
    defaults = defaults or {}

    def register(fn: Callable[..., None]) -> Callable[..., None]:
        own = [p for p in inspect.signature(fn, eval_str=True).parameters.values() if p.name != "opts"]
        shared = [inspect.Parameter(k, inspect.Parameter.KEYWORD_ONLY, annotation=ann, default=defaults.get(k, d))
                  for k, (ann, d) in OPTIONS.items() if k not in exclude and k not in {p.name for p in own}]

        def command(**kwargs: Any) -> None:
            opts = DeploymentOptions(**{k: kwargs.pop(k) for k in list(kwargs) if k in OPTIONS and
                                        k not in {p.name for p in own}})
            fn(opts, **kwargs)

        command.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
            shared + [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own])
        command.__doc__, command.__name__ = fn.__doc__, fn.__name__
        command.__annotations__ = {}
        app.command(name)(command)
        return fn

    return register


def environment(env: dict[str, str] | None = None) -> dict[str, Any]:
    """What vLLM reads from the environment that moves memory: PYTORCH_CUDA_ALLOC_CONF's expandable_segments and
    VLLM_FLASHINFER_WORKSPACE_BUFFER_SIZE (bytes), as Flags fields; a malformed value is a one-line error."""
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
    return out


def build(o: DeploymentOptions):
    """Resolve the options into (Deployment, Coefficients): vLLM's defaults filled in for the GPU and version."""
    from dataclasses import replace

    from ..coefficients import load
    from ..deployment import Flags, parse_speculative_config, resolve
    from ..errors import UserError
    from ..hardware import catalog
    from ..hardware.facts import known_backends
    from ..model.checkpoint import resolve_model
    from ..units import parse_size, parse_tokens
    from ..vllm_rules import choose_version

    method, k, draft = "mtp", 0, None
    if o.speculative_config:
        method, k, draft = parse_speculative_config(o.speculative_config)
    if o.mtp is not None:
        method, k = "mtp", o.mtp
    mml: int | None = None
    if o.max_model_len is not None:
        mml = -1 if str(o.max_model_len).lower() in ("auto", "-1") else parse_tokens(o.max_model_len)
    backend = None
    if o.attention_backend:
        backend = o.attention_backend.upper()
        if backend not in known_backends():
            raise UserError(f"--attention-backend {o.attention_backend!r} is not modelled; use one of "
                            f"{', '.join(known_backends())}")
    flags = Flags(gpu_memory_utilization=o.gmu, kv_cache_dtype=o.kv_cache_dtype, enforce_eager=o.enforce_eager,
                  num_speculative_tokens=k, speculative_method=method, max_num_seqs=o.max_num_seqs,
                  max_num_batched_tokens=o.max_num_batched_tokens, max_model_len=mml,
                  enable_prefix_caching=o.enable_prefix_caching, tensor_parallel_size=o.tensor_parallel_size,
                  compile_cache=o.compile_cache, language_model_only=o.language_model_only,
                  other_gpu_bytes=parse_size(o.other_gpu_usage) if o.other_gpu_usage else 0,
                  attention_backend=backend, draft_model=draft,
                  free_at_start_bytes=parse_size(o.free_memory) if o.free_memory else None)
    flags = replace(flags, **environment())
    src = resolve_model(o.model)
    gpu = catalog.resolve(o.gpu, o.gpu_memory)
    if o.simulated_on:
        gpu = catalog.simulated(gpu, catalog.lookup(o.simulated_on))
    choice = choose_version(o.vllm_version)
    d = resolve(src, gpu, choice.rules, flags).with_(vllm=choice)
    return d, load(choice.rules.version, gpu.key, src.ref)


JsonOpt = Annotated[bool, typer.Option("--json", help="One JSON object on stdout, for scripts.")]
PlotOpt = Annotated[Optional[str], typer.Option("--plot", help="Also draw the picture to this PNG (needs the "
                                                "'notebook' extra: matplotlib).")]
TargetOpt = Annotated[Optional[str], typer.Option("--target-context", help="Find the smallest GMU at which this "
                                                  "many tokens start (65536, 64k).")]

# for commands that take a few of the shared options without a deployment (fit, explain)
ModelOpt = OPTIONS["model"][0]
GpuOpt = OPTIONS["gpu"][0]
VersionOpt = OPTIONS["vllm_version"][0]
