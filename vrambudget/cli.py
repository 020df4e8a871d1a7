"""The `vrambudget` command line (typer). Errors print one line and exit 2, never a traceback."""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any, Callable, Optional

import typer

from .errors import UserError

app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None,
                  help="Predict how vLLM spends GPU memory and the longest context a deployment serves; "
                       "prove it with real startups (probe) and learn from them (fit).")

P = "vLLM flags"
ModelOpt = Annotated[Optional[str], typer.Option("--model", "-m", help="Bundled profile name (see `vrambudget models`), "
                     "a local model folder, or a Hugging Face id. Default: qwen3.5-9b-awq.")]
GpuOpt = Annotated[Optional[str], typer.Option("--gpu", "-g", help="GPU from the catalog (`vrambudget gpus`), or 'auto' "
                   "to read the local one through NVML. Default: rtx4060ti.")]
GpuMemOpt = Annotated[Optional[str], typer.Option("--gpu-memory", help="Total GPU memory for a GPU not in the catalog, "
                      "e.g. 23.5GiB (as CUDA reports it).")]
GmuOpt = Annotated[Optional[float], typer.Option("--gpu-memory-utilization", "--gmu", rich_help_panel=P,
                   help="Fraction of the GPU vLLM may use (default: vLLM's, 0.9 in 0.20, 0.92 in 0.33).")]
KvOpt = Annotated[str, typer.Option("--kv-cache-dtype", rich_help_panel=P, help="auto | fp8 | fp8_e4m3 | fp8_e5m2 | bfloat16 | int8_per_token_head | fp8_per_token_head (per-token-head KV: 1 byte + an fp32 scale per head and token; Triton attention).")]
EagerOpt = Annotated[bool, typer.Option("--enforce-eager/--cuda-graphs", rich_help_panel=P, help="No CUDA graphs / torch.compile.")]
MtpOpt = Annotated[Optional[int], typer.Option("--mtp", rich_help_panel=P, help="MTP speculative decoding with K tokens "
                   "(a bare --mtp means K=2; 0 = off).", min=0, max=8)]
SpecOpt = Annotated[Optional[str], typer.Option("--speculative-config", rich_help_panel=P,
                    help='vLLM\'s JSON, e.g. \'{"method":"mtp","num_speculative_tokens":2}\'; a DFlash drafter: '
                         '\'{"method":"dflash","model":"qwen3.6-27b-dflash","num_speculative_tokens":15}\' (a '
                         'bundled drafter or a folder with its config.json).')]
SeqsOpt = Annotated[Optional[int], typer.Option("--max-num-seqs", rich_help_panel=P, min=1,
                    help="Default: vLLM's for the GPU (256 below 70 GiB, 1024 above).")]
BatchOpt = Annotated[Optional[int], typer.Option("--max-num-batched-tokens", rich_help_panel=P, min=1,
                     help="Default: vLLM's for the GPU (2048 below 70 GiB, 8192 above).")]
MmlOpt = Annotated[Optional[str], typer.Option("--max-model-len", rich_help_panel=P,
                   help="Context length (32768, 128k), or auto / -1 to let vLLM fit it. Default: the model's maximum.")]
PcOpt = Annotated[bool, typer.Option("--enable-prefix-caching/--no-enable-prefix-caching", rich_help_panel=P)]
TpOpt = Annotated[int, typer.Option("--tensor-parallel-size", "-tp", rich_help_panel=P, min=1, help="Budget per rank.")]
CompileOpt = Annotated[str, typer.Option("--compile-cache", rich_help_panel=P,
                       help="cold: first boot of this graph (larger profiling peak); warm: compiled before; fresh: the "
                       "first boot on this machine or after an upgrade (Triton kernels JIT-compile inside the profile).")]
LmoOpt = Annotated[Optional[bool], typer.Option("--language-model-only/--with-vision", rich_help_panel=P,
                   help="Skip the vision tower of a multimodal checkpoint (default: on).")]
VerOpt = Annotated[Optional[str], typer.Option("--vllm-version", help="The vLLM you run, e.g. 0.20.2 (modelled: "
                   "0.19, 0.20.x and 0.26.x measured, 0.33.x from source; others are planned with the nearest older rules and "
                   "a warning). Default: the vLLM installed here (its package metadata), else the newest modelled.")]
OtherOpt = Annotated[Optional[str], typer.Option("--other-gpu-usage", help="Memory other processes hold on the GPU, e.g. 0.6GiB.")]
BackendOpt = Annotated[Optional[str], typer.Option("--attention-backend", help="vLLM's --attention-backend, "
                      "when you force one: FLASH_ATTN, FLASHINFER or TRITON_ATTN (default: the one vLLM picks "
                      "on this GPU for this KV dtype).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="One JSON object on stdout, for scripts.")]
PlotOpt = Annotated[Optional[str], typer.Option("--plot", help="Also draw the picture to this PNG (needs the "
                    "'notebook' extra: matplotlib).")]
TargetOpt = Annotated[Optional[str], typer.Option("--target-context", help="Find the smallest GMU at which this many tokens start.")]


def run_safely(fn: Callable[[], None]) -> None:
    try:
        fn()
    except UserError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None


def _backend_choice(name: str | None) -> str | None:
    from .errors import UserError
    from .hardware.facts import known_backends

    if not name:
        return None
    known = known_backends()
    if name.upper() not in known:
        raise UserError(f"--attention-backend {name!r} is not modelled; use one of {', '.join(known)}")
    return name.upper()


def build(model, gpu, gpu_memory, gmu, kv, eager, mtp, spec, seqs, batch, mml, pc, tp, compile_cache, lmo, ver, other,
          backend=None):
    """Resolve CLI options into (Deployment, Coefficients)."""
    from . import coefficients
    from .hardware import catalog as gpus
    from .model.checkpoint import resolve_model
    from .deployment import Flags, parse_speculative_config, resolve
    from .units import parse_size, parse_tokens
    from .vllm_rules import choose_version

    method, k, draft = "mtp", 0, None
    if spec:
        method, k, draft = parse_speculative_config(spec)
    if mtp is not None:
        method, k = "mtp", mtp
    if mml is None:
        mml_v = None
    elif str(mml).lower() in ("auto", "-1"):
        mml_v = -1
    else:
        mml_v = parse_tokens(mml)
    flags = Flags(gpu_memory_utilization=gmu, kv_cache_dtype=kv, enforce_eager=eager, num_speculative_tokens=k,
                  speculative_method=method, max_num_seqs=seqs, max_num_batched_tokens=batch, max_model_len=mml_v,
                  enable_prefix_caching=pc, tensor_parallel_size=tp, compile_cache=compile_cache,
                  language_model_only=lmo, other_gpu_bytes=parse_size(other) if other else 0,
                  attention_backend=_backend_choice(backend), draft_model=draft)
    src = resolve_model(model)
    g = gpus.resolve(gpu, gpu_memory)
    choice = choose_version(ver)
    rules = choice.rules
    d = resolve(src, g, rules, flags).with_(vllm=choice)
    c = coefficients.load(rules.version, g.key, src.ref)
    return d, c


def emit_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, indent=2) + "\n")


@app.command()
def predict(model: ModelOpt = None, gpu: GpuOpt = None, gpu_memory: GpuMemOpt = None, gmu: GmuOpt = None,
            kv_cache_dtype: KvOpt = "auto", enforce_eager: EagerOpt = False, mtp: MtpOpt = None,
            speculative_config: SpecOpt = None, max_num_seqs: SeqsOpt = None, max_num_batched_tokens: BatchOpt = None,
            max_model_len: MmlOpt = None, enable_prefix_caching: PcOpt = False, tensor_parallel_size: TpOpt = 1,
            compile_cache: CompileOpt = "cold", language_model_only: LmoOpt = None, vllm_version: VerOpt = None,
            other_gpu_usage: OtherOpt = None, target_context: TargetOpt = None, plot: PlotOpt = None,
            prompt_tokens: Annotated[Optional[str], typer.Option("--prompt-tokens", help="Check that a prompt of this "
                "many tokens serves after startup (default: the ceiling).")] = None,
            available_kv_gib: Annotated[Optional[float], typer.Option("--available-kv-gib",
                help="Skip the budget: plan the KV cache for this much memory (e.g. a log's "
                     "'Available KV cache memory').")] = None,
            attention_backend: BackendOpt = None,
            json_out: JsonOpt = False) -> None:
    """The whole budget, KV plan and ceiling for one deployment (no GPU needed)."""

    def go() -> None:
        from .predict import answer, answer_json, cannot_start_at_all, min_gmu_for_context, predict as run
        from .output.render import prediction_text
        from .units import parse_tokens

        d, c = build(model, gpu, gpu_memory, gmu, kv_cache_dtype, enforce_eager, mtp, speculative_config,
                     max_num_seqs, max_num_batched_tokens, max_model_len, enable_prefix_caching,
                     tensor_parallel_size, compile_cache, language_model_only, vllm_version, other_gpu_usage,
                     attention_backend)
        if available_kv_gib is not None:
            return _kv_only(d, available_kv_gib, json_out)
        if target_context:
            tokens = parse_tokens(target_context)
            g = min_gmu_for_context(d, c, tokens)
            if json_out:
                emit_json({"target_context": tokens, "min_gmu": g, "inputs": d.inputs()})
            elif g is None:
                raise UserError(f"{tokens:,} tokens do not start at any GMU on {d.gpu.name} with these flags")
            else:
                typer.echo(f"smallest GMU for max_model_len {tokens:,}: {g:.2f}")
                typer.echo(prediction_text(run(d.with_(gmu=g, max_model_len=tokens, auto_fit=False), c)))
            return
        ans = answer(d, c, prompt_tokens=parse_tokens(prompt_tokens) if prompt_tokens else None)
        p = ans.first_boot if d.compile_cache in ("cold", "fresh") else ans.restart
        if json_out:
            emit_json({**p.to_json(), **answer_json(ans)})
        else:
            typer.echo(prediction_text(p, ans))
        if plot:
            _plot_budget(d, c, p, plot)
        if cannot_start_at_all(p):
            raise typer.Exit(1)

    run_safely(go)


def _kv_only(d, available_kv_gib: float, json_out: bool) -> None:
    from .kv.planner import plan_startup
    from .predict import layout_for
    from .units import GiB

    if not available_kv_gib > 0:
        raise UserError(f"--available-kv-gib must be a positive size in GiB (as a log's 'Available KV cache "
                        f"memory' line gives it), got {available_kv_gib}")

    lay = layout_for(d)
    avail = int(round(available_kv_gib * GiB))
    p = plan_startup(lay, avail, d.max_model_len, d.auto_fit, d.rules)
    out = {"available_kv_bytes": avail, "block_size": lay.block_size, "padding_layers": lay.padding_layers,
           "padding_warnings": lay.padding_warnings, "num_blocks": p.num_blocks, "max_model_len": p.max_model_len,
           "kv_cache_tokens": p.kv_cache_tokens, "max_concurrency": round(p.max_concurrency, 4),
           "max_model_len_ceiling": p.ceiling, "inputs": d.inputs()}
    if json_out:
        emit_json(out)
        return
    pads = "; ".join(f"Add {n} padding layers, may waste at most {pct:.2f}%" for n, pct in lay.padding_warnings)
    typer.echo(f"KV plan for {available_kv_gib:.2f} GiB ({d.version_label}):\n"
               f"  block size {lay.block_size} tokens{'; ' + pads if pads else ''}\n"
               f"  {p.num_blocks:,} blocks of {lay.bytes_per_block:,} bytes\n"
               f"  GPU KV cache size: {p.kv_cache_tokens:,} tokens\n"
               f"  Maximum concurrency for {p.max_model_len:,} tokens per request: {p.max_concurrency:.2f}x\n"
               f"  ceiling (auto-fit max_model_len): {p.ceiling:,}")


@app.command()
def table(model: ModelOpt = None, gpu: GpuOpt = None, gpu_memory: GpuMemOpt = None,
          kv_cache_dtype: KvOpt = "auto", mtp: Annotated[int, typer.Option("--mtp", help="MTP tokens of the MTP columns.", min=1, max=8)] = 2,
          max_num_seqs: SeqsOpt = None, max_num_batched_tokens: BatchOpt = None,
          enable_prefix_caching: PcOpt = False, tensor_parallel_size: TpOpt = 1, compile_cache: CompileOpt = "cold",
          language_model_only: LmoOpt = None, vllm_version: VerOpt = None, other_gpu_usage: OtherOpt = None,
          gmu_min: Annotated[float, typer.Option("--gmu-min")] = 0.80,
          gmu_max: Annotated[float, typer.Option("--gmu-max")] = 0.99,
          gmu_step: Annotated[float, typer.Option("--gmu-step")] = 0.01,
          target_context: TargetOpt = None, plot: PlotOpt = None,
          records: Annotated[Optional[list[str]], typer.Option("--records", help="Probe records to draw over the "
                             "predicted curves (with --plot).")] = None,
          json_out: JsonOpt = False) -> None:
    """Ceiling table: longest max_model_len over GMU x graphs/eager x MTP off/on."""

    def go() -> None:
        from .predict import ceiling_table, target_row
        from .output.render import table_text
        from .units import parse_tokens

        if not (0 < gmu_min <= gmu_max <= 1) or gmu_step <= 0:
            raise UserError("need 0 < --gmu-min <= --gmu-max <= 1 and --gmu-step > 0")
        d, c = build(model, gpu, gpu_memory, None, kv_cache_dtype, False, 0, None, max_num_seqs,
                     max_num_batched_tokens, None, enable_prefix_caching, tensor_parallel_size, compile_cache,
                     language_model_only, vllm_version, other_gpu_usage)
        n = int(round((gmu_max - gmu_min) / gmu_step)) + 1
        gmus = [round(gmu_min + i * gmu_step, 4) for i in range(n)]
        t = ceiling_table(d, c, gmus, mtp)
        tokens = parse_tokens(target_context) if target_context else None
        target = target_row(d, c, tokens, mtp) if tokens else None
        target_first = target_row(d, c, tokens, mtp, "cold") if tokens else None
        if json_out:
            emit_json({**t, "target_context": tokens, "min_gmu": target, "min_gmu_first_boot": target_first,
                       "inputs": d.inputs()})
        else:
            typer.echo(f"{d.model.ref} on {d.gpu.name}, {d.version_label}, KV {d.kv_cache_dtype}")
            typer.echo(table_text(t, target, tokens, target_first))
        if plot:
            from pathlib import Path

            from .output import plots
            from .profiles import read_jsonl

            pts = plots.probe_points([r for f in records or [] for r in read_jsonl(Path(f))])
            ax = plots.ceiling_curves(t, points=pts, title=f"{d.model.ref} on {d.gpu.name}, KV {d.kv_cache_dtype}")
            typer.echo(f"plot: {plots.save(ax, plot)}", err=json_out)

    run_safely(go)


@app.command("plan")
def plan_cmd(target_context: Annotated[str, typer.Option("--target-context", help="The context you want to serve "
                                        "(tokens: 65536, 64k).")],
             model: ModelOpt = None, gpu: GpuOpt = None, gpu_memory: GpuMemOpt = None,
             kv_cache_dtype: KvOpt = "auto", mtp: Annotated[int, typer.Option("--mtp", min=1, max=8,
                                                                               help="MTP tokens of the MTP options.")] = 2,
             max_num_seqs: SeqsOpt = None, max_num_batched_tokens: BatchOpt = None,
             enable_prefix_caching: PcOpt = False, tensor_parallel_size: TpOpt = 1, language_model_only: LmoOpt = None,
             vllm_version: VerOpt = None, other_gpu_usage: OtherOpt = None,
             fmt: Annotated[str, typer.Option("--format", help="How to print the chosen command: shell | systemd | "
                                             "compose | json.")] = "shell",
             checkpoint: Annotated[Optional[str], typer.Option("--checkpoint", help="Model argument of the command.")] = None,
             json_out: JsonOpt = False) -> None:
    """The fastest configuration that serves a wanted context: CUDA graphs + MTP, graphs, eager + MTP,
    eager (in that order), with the GMU each needs, what its first boot does, and the command."""

    def go() -> None:
        from tabulate import tabulate

        from .output import servecmd as sc
        from .predict import plan as run_plan, predict as run
        from .probe.session import model_arg
        from .units import parse_tokens

        if fmt not in ("shell", "systemd", "compose", "json"):
            raise UserError(f"--format {fmt!r}: use shell, systemd, compose or json")
        tokens = parse_tokens(target_context)
        d, c = build(model, gpu, gpu_memory, None, kv_cache_dtype, False, 0, None, max_num_seqs,
                     max_num_batched_tokens, str(tokens), enable_prefix_caching, tensor_parallel_size, "warm",
                     language_model_only, vllm_version, other_gpu_usage)
        opts = run_plan(d, c, tokens, mtp)
        best = next((o for o in opts if o.serves), None)
        rows = [[o.label, f"{o.gmu_restart:.2f}" if o.gmu_restart else "-",
                 ("same" if o.enforce_eager else f"{o.gmu_first_boot:.2f}" if o.gmu_first_boot else "fails")
                 if o.gmu_restart else "-", f"{o.max_serving_gmu:.2f}" if o.max_serving_gmu else "-",
                 "yes" if o.serves else "no"] for o in opts]
        result: dict[str, Any] = {"target_context": tokens, "options": [o.__dict__ | {"gmu": o.gmu} for o in opts],
                                  "inputs": d.inputs()}
        text = [f"{tokens:,} tokens of {d.model.ref} on {d.gpu.name}, {d.version_label}, KV {d.kv_cache_dtype}",
                tabulate(rows, headers=["configuration", "GMU (restart)", "GMU (first boot)", "serves up to GMU",
                                        "serves"], tablefmt="simple", disable_numparse=True)]
        if best is None:
            text.append(f"Nothing serves {tokens:,} tokens here. " + _what_would(d, c, tokens))
            result["suggestion"] = text[-1]
        else:
            dd = d.with_(enforce_eager=best.enforce_eager, spec_tokens=mtp if best.mtp else 0, speculative_method="mtp",
                         gmu=best.gmu, compile_cache="warm")
            cmd = sc.build_command(dd, run(dd, c), checkpoint or model_arg(dd), tokens, 8000, None)
            first = ("" if best.enforce_eager or (best.gmu_first_boot and best.gmu_first_boot <= best.gmu) else
                     " Its first boot after a change compiles cold and fails at this GMU; the restart starts "
                     "(Restart=on-failure in the systemd unit).")
            text.append(f"Fastest that serves: {best.label} at GMU {best.gmu:.2f}.{first}")
            out = {"shell": lambda: sc.shell(cmd) + "\n",
                   "systemd": lambda: sc.systemd(cmd, f"vLLM {cmd.argv[1]} "
                                                      f"(max_model_len {tokens}, GMU {best.gmu:.2f}; vrambudget)", None),
                   "compose": lambda: sc.compose(cmd, _image_version(d.rules.version), 8000),
                   "json": lambda: json.dumps(sc.as_json(cmd), indent=2) + "\n"}[fmt]()
            text.append(out.rstrip("\n"))
            result["chosen"] = best.label
            result["command"] = sc.as_json(cmd)
        if json_out:
            emit_json(result)
        else:
            typer.echo("\n".join(text))
        if best is None:
            raise typer.Exit(1)

    run_safely(go)


def _what_would(d, c, tokens: int) -> str:
    """Where nothing fits: which change would (another catalog GPU, fp8 KV, a 4-bit checkpoint, TP 2)."""
    from .hardware.catalog import catalog
    from .predict import min_gmu_for_context

    ideas = []
    if d.kv_dtype_bytes > 1:
        g = min_gmu_for_context(d.with_(kv_cache_dtype="fp8", kv_dtype_bytes=1, enforce_eager=True), c, tokens)
        if g:
            ideas.append(f"--kv-cache-dtype fp8 (eager starts at GMU {g:.2f})")
    bigger = sorted((g for g in catalog().values() if g.total_bytes > d.gpu.total_bytes), key=lambda g: g.total_bytes)
    for g in bigger:
        gm = min_gmu_for_context(d.with_(gpu=g, enforce_eager=True), c, tokens)
        if gm:
            ideas.append(f"--gpu {g.key} (eager at GMU {gm:.2f})")
            break
    if d.model.arch.quantization is None:
        ideas.append("a 4-bit checkpoint (AWQ/GPTQ/NVFP4: point --model at it)")
    if d.tp == 1:
        ideas.append("--tensor-parallel-size 2 on two cards")
    return "Would: " + "; ".join(ideas) + "."


def _plot_budget(d, c, p, path: str) -> None:
    """Stacked budget bars: this configuration next to its graphs/eager x MTP variants."""
    from .output import plots
    from .predict import predict as run, table_columns

    items = [("this", p)]
    for col in table_columns(d, d.spec_tokens or 2):
        items.append((col.label, run(d.with_(enforce_eager=col.enforce_eager, spec_tokens=col.spec_tokens,
                                             speculative_method="mtp"), c)))
    ax = plots.budget_bars(items, title=f"{d.model.ref} on {d.gpu.name}, GMU {d.gmu:.2f}")
    typer.echo(f"plot: {plots.save(ax, path)}", err=True)


@app.command()
def probe(model: ModelOpt = None, gpu: GpuOpt = "auto", gpu_memory: GpuMemOpt = None, gmu: GmuOpt = None,
          kv_cache_dtype: KvOpt = "auto", enforce_eager: EagerOpt = False, mtp: MtpOpt = None,
          speculative_config: SpecOpt = None, max_num_seqs: SeqsOpt = None, max_num_batched_tokens: BatchOpt = None,
          enable_prefix_caching: PcOpt = False, tensor_parallel_size: TpOpt = 1,
          compile_cache: CompileOpt = "cold", language_model_only: LmoOpt = None, vllm_version: VerOpt = None,
          bisect: Annotated[bool, typer.Option("--bisect", help="At a fixed GMU, find the largest max_model_len "
                                               "that starts and serves (default mode).")] = True,
          target_context: TargetOpt = None,
          vllm_cmd: Annotated[str, typer.Option("--vllm-cmd", help="How to start vLLM's server.")] = "vllm serve",
          port: Annotated[Optional[int], typer.Option("--port", help="Server port (default: a free one).")] = None,
          dummy_weights: Annotated[bool, typer.Option("--dummy-weights", help="--load-format dummy: real shapes, "
                                                      "random values, no download.")] = False,
          startup_timeout: Annotated[float, typer.Option("--startup-timeout", help="Seconds per startup.")] = 900.0,
          extra_args: Annotated[str, typer.Option("--extra-args", help="More vLLM flags, passed through.")] = "",
          runs_dir: Annotated[Optional[str], typer.Option("--runs-dir", help="Where logs and records go "
                                                          "(default: a new folder under the user data dir).")] = None,
          verify: Annotated[bool, typer.Option("--verify/--no-verify", help="Prove the ceiling with a request of "
                                               "about that many prompt tokens.")] = True,
          allow_shared_gpu: Annotated[bool, typer.Option("--allow-shared-gpu")] = False,
          max_startups: Annotated[int, typer.Option("--max-startups", min=1)] = 8,
          simulate_gpu: Annotated[Optional[str], typer.Option("--simulate-gpu", help="Measure a smaller card from the "
                                  "catalog on this bigger GPU: a helper process holds memory so vLLM sees that card's "
                                  "free memory and budget.")] = None,
          free_memory: Annotated[Optional[str], typer.Option("--free-memory", help="With --simulate-gpu or "
                                 "--gpu-memory: the free memory vLLM should see at start (default: the card's total "
                                 "less its CUDA context).")] = None,
          max_model_len_cap: Annotated[Optional[str], typer.Option("--max-model-len", help="Bisect no higher than "
                                       "this context (32768, 64k): the length you want to serve.")] = None,
          turn_tokens: Annotated[int, typer.Option("--turn-tokens", min=0, help="Verify also with a multi-turn "
                                 "session whose context grows by this many tokens a turn (0: off).")] = 0,
          max_turns: Annotated[int, typer.Option("--max-turns", min=1, help="Turns of the multi-turn verify.")] = 12,
          attention_backend: BackendOpt = None,
          refit: Annotated[bool, typer.Option("--fit/--no-fit", help="Refit coefficients at the end.")] = True,
          json_out: JsonOpt = False) -> None:
    """Find the real ceiling with real `vllm serve` startups, verify it, record every startup, refit."""

    def go() -> None:
        import shlex
        import time as _t
        from pathlib import Path

        from .probe.session import ProbeOptions, Prober
        from .profiles import user_dir
        from .units import parse_tokens

        sim = simulate_gpu or (gpu_memory if free_memory else None)
        d, c = build(model, simulate_gpu or (None if gpu_memory else gpu), gpu_memory, gmu, kv_cache_dtype,
                     enforce_eager, mtp, speculative_config, max_num_seqs, max_num_batched_tokens, None,
                     enable_prefix_caching, tensor_parallel_size, compile_cache, language_model_only, vllm_version, None,
                     attention_backend)
        sim_opts = _simulation(d, free_memory) if sim else {}
        rd = Path(runs_dir) if runs_dir else user_dir() / "runs" / _t.strftime("%Y%m%d-%H%M%S")
        rd.mkdir(parents=True, exist_ok=True)
        opts = ProbeOptions(vllm_cmd=shlex.split(vllm_cmd), port=port, dummy_weights=dummy_weights,
                            startup_timeout=startup_timeout, extra_args=shlex.split(extra_args), runs_dir=rd,
                            verify=verify, allow_shared_gpu=allow_shared_gpu, max_startups=max_startups,
                            turn_tokens=turn_tokens, max_turns=max_turns,
                            max_model_len=parse_tokens(max_model_len_cap) if max_model_len_cap else None, **sim_opts)
        prober = Prober(d, c, opts, report=lambda line: typer.echo(line, err=json_out))
        summary = prober.target(parse_tokens(target_context)) if target_context else prober.bisect()
        if refit and prober.records_path.exists():
            summary["fit"] = _fit_and_write([prober.records_path], d.rules.version, d.gpu.key, d.model.ref,
                                            None, quiet=json_out)
        if json_out:
            emit_json(summary)
        else:
            _print_probe_summary(summary)
        if summary.get("failed"):
            raise typer.Exit(1)

    run_safely(go)


def _simulation(d, free_memory: str | None) -> dict:
    """ProbeOptions for measuring the card `d.gpu` on the local, bigger GPU (read through NVML)."""
    from .hardware.facts import cuda_context
    from .hardware.catalog import detect
    from .units import parse_size

    real = detect()
    if real.total_bytes <= d.gpu.total_bytes:
        raise UserError(f"--simulate-gpu needs a bigger GPU than {d.gpu.name} ({d.gpu.total_gib:.2f} GiB); "
                        f"this one is {real.name} ({real.total_gib:.2f} GiB)")
    free = parse_size(free_memory) if free_memory else d.gpu.total_bytes - cuda_context(d.gpu).value
    return {"simulate_free_bytes": free, "real_total_bytes": real.total_bytes,
            "real_context_bytes": cuda_context(real).value}


def _print_probe_summary(s: dict) -> None:
    from tabulate import tabulate

    rows = [[a["n"], f"{a['gmu']:.2f}", f"{a['max_model_len']:,}", a["outcome"], f"{a['seconds']:.0f}",
             {True: "ok", False: "FAILED", None: ""}[a["verify"]]] for a in s["attempts"]]
    typer.echo(tabulate(rows, headers=["#", "GMU", "max_model_len", "outcome", "s", "verify"], tablefmt="simple",
                        disable_numparse=True))
    if s.get("failed"):
        typer.echo(f"probe stopped: {s['failed'].replace('_', ' ')} (logs and records: {s['records']})")
    elif s["mode"] == "bisect":
        ooms = s.get("runtime_oom_gmus") or []
        at = f" at GMU {s['gmu']:.2f}" if s.get("gmu") is not None else ""
        typer.echo(f"ceiling{at}: max_model_len {s['ceiling']:,} (predicted {s.get('predicted', 0):,}) "
                   f"in {s['startups']} startups; records: {s['records']}")
        if ooms:
            typer.echo("started but ran out of memory serving at GMU " + ", ".join(f"{g:.2f}" for g in ooms)
                       + " (a startup-only check would have certified it)")
    else:
        g = s.get("min_gmu")
        typer.echo(f"smallest GMU for {s['tokens']:,} tokens: {g:.2f}" if g else
                   f"no GMU up to 0.99 starts {s['tokens']:,} tokens", nl=True)


def _fit_and_write(paths, version, gpu_key, model_ref, out, quiet=False) -> dict:
    from pathlib import Path

    from . import coefficients as cf
    from .fit import fit as run_fit, load_samples, profile_json
    from .profiles import write_json_atomic

    samples = load_samples([Path(p) for p in paths], None)
    base = cf.load(version, gpu_key, model_ref)
    res = run_fit(samples, base)
    dest = Path(out) if out else cf.fitted_profile_path(gpu_key or "any", model_ref, version)
    data = profile_json(res, version, gpu_key, model_ref, [str(p) for p in paths])
    if dest.is_file():  # keep what an earlier fit learnt and this one did not refit, and a copy of it
        from .profiles import read_json

        old = read_json(dest)
        write_json_atomic(dest.with_name(dest.stem + ".previous.json"), old)
        data["coefficients"] = {**old.get("coefficients", {}), **data["coefficients"]}
        data["fitted_from"] = old.get("fitted_from", []) + [f for f in data["fitted_from"]
                                                            if f not in old.get("fitted_from", [])]
    write_json_atomic(dest, data)
    worst = lambda errs: max((abs(e) for _, e in errs), default=0.0)  # noqa: E731
    if not quiet:
        from tabulate import tabulate

        rows = [[f"{Path(src).parent.name}/{Path(src).name}", f"{b:+.3f}", f"{a:+.3f}"]
                for (src, b), (_, a) in zip(res.before, res.after, strict=True)]
        typer.echo(tabulate(rows, headers=["startup", "error before (GiB)", "after"], tablefmt="simple",
                            disable_numparse=True))
        typer.echo(f"refitted {', '.join(res.changed) or 'nothing'}; worst available-KV error "
                   f"{worst(res.before):.3f} -> {worst(res.after):.3f} GiB; profile: {dest}")
    return {"profile": str(dest), "changed": res.changed, "worst_error_before_gib": round(worst(res.before), 4),
            "worst_error_after_gib": round(worst(res.after), 4)}


@app.command()
def fit(records: Annotated[list[str], typer.Argument(help="Probe records (*.jsonl) and/or vLLM startup logs.")],
        gpu: GpuOpt = None, model: ModelOpt = None, vllm_version: VerOpt = None,
        out: Annotated[Optional[str], typer.Option("--out", help="Write the profile here instead of the user "
                                                   "profile dir predict reads.")] = None,
        json_out: JsonOpt = False) -> None:
    """Refit the measured coefficients from records/logs and save them as a profile predict uses."""

    def go() -> None:
        from .hardware.catalog import lookup
        from .profiles import read_jsonl
        from .vllm_rules import rules_for

        from pathlib import Path

        first = next((r for p in records if p.endswith(".jsonl") and Path(p).is_file()
                      for r in read_jsonl(Path(p)) if "inputs" in r), None)
        version = rules_for(vllm_version or (first or {}).get("vllm_version")).version
        gpu_key = lookup(gpu).key if gpu else (first or {}).get("gpu_key")
        model_ref = model or ((first or {}).get("inputs") or {}).get("model")
        summary = _fit_and_write(records, version, gpu_key, model_ref, out, quiet=json_out)
        if json_out:
            emit_json(summary)

    run_safely(go)


@app.command()
def explain(log: Annotated[str, typer.Argument(help="A vLLM startup log (a file, or - for stdin).")],
            model: ModelOpt = None, gpu: GpuOpt = None,
            drafter: Annotated[str | None, typer.Option(
                "--drafter", metavar="<str>",
                help="The DFlash drafter the log's speculative config names, where its path is not on this "
                     "machine: a bundled drafter (see `vrambudget models`) or a folder with its config.json.")] = None,
            json_out: JsonOpt = False) -> None:
    """Read a vLLM startup log: the flags it was started with, its budget next to predict's, and what
    its outcome means."""

    def go() -> None:
        from pathlib import Path

        from tabulate import tabulate

        from .explain import compare, deployment_from_log, explain_json, meaning
        from .hardware.catalog import lookup
        from .logparse import parse_log

        text = sys.stdin.read() if log == "-" else _read_text(Path(log))
        facts = parse_log(text)
        d = deployment_from_log(facts, model, lookup(gpu) if gpu else None, drafter)
        cmp = compare(facts, d)
        if json_out:
            emit_json(explain_json(cmp))
            return
        i = d.inputs()
        typer.echo(f"{log}: vLLM {facts.vllm_version or '?'} | {i['model']} on {i['gpu']} | GMU {d.gmu:.2f} | "
                   f"KV {d.kv_cache_dtype} | {'eager' if d.enforce_eager else 'graphs (' + d.compile_cache + ' compile)'}"
                   f" | {d.speculative_method.upper() + ' ' + str(d.spec_tokens) if d.spec_tokens else 'no MTP'} | seqs {d.max_num_seqs} | "
                   f"batched {d.max_num_batched_tokens}")
        rows = [[t, "-" if lg is None else f"{lg:.2f}", f"{pr:.2f}", "" if e is None else f"{e:+.2f}"]
                for t, lg, pr, e in cmp.rows]
        typer.echo(tabulate(rows, headers=["term", "logged GiB", "predicted GiB", "difference"], tablefmt="simple",
                            disable_numparse=True))
        typer.echo(f"{facts.outcome.upper()}: {meaning(cmp)}")

    run_safely(go)


def _read_text(path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError as e:
        raise UserError(f"cannot read {path}: {e.strerror}") from None


@app.command("serve-cmd")
def serve_cmd(model: ModelOpt = None, gpu: GpuOpt = None, gpu_memory: GpuMemOpt = None, gmu: GmuOpt = None,
              kv_cache_dtype: KvOpt = "auto", enforce_eager: EagerOpt = False, mtp: MtpOpt = None,
              speculative_config: SpecOpt = None, max_num_seqs: SeqsOpt = None,
              max_num_batched_tokens: BatchOpt = None, max_model_len: MmlOpt = None,
              enable_prefix_caching: PcOpt = False, tensor_parallel_size: TpOpt = 1,
              compile_cache: CompileOpt = "cold", language_model_only: LmoOpt = None, vllm_version: VerOpt = None,
              other_gpu_usage: OtherOpt = None,
              margin: Annotated[Optional[str], typer.Option("--margin", help="Stay this far below the predicted "
                                                            "ceiling: tokens (4096) or a share (5%).")] = None,
              fmt: Annotated[str, typer.Option("--format", help="shell | systemd | compose | json")] = "shell",
              checkpoint: Annotated[Optional[str], typer.Option("--checkpoint", help="Model argument of the command "
                                    "(default: the profile's Hugging Face id, or --model's folder/id).")] = None,
              port: Annotated[int, typer.Option("--port")] = 8000,
              served_model_name: Annotated[Optional[str], typer.Option("--served-model-name")] = None,
              user: Annotated[Optional[str], typer.Option("--user", help="systemd: run as this user.")] = None,
              out: Annotated[Optional[str], typer.Option("--out", help="Write to this file instead of stdout.")] = None,
              force: Annotated[bool, typer.Option("--force", help="Replace --out if it exists.")] = False,
              ) -> None:
    """Print the `vllm serve` command for a configuration (max_model_len: the predicted ceiling or
    --margin below it) as a shell line, a systemd unit, a docker compose service or JSON."""

    def go() -> None:
        from pathlib import Path

        from .output import servecmd as sc
        from .predict import predict as run
        from .probe.session import model_arg

        if fmt not in ("shell", "systemd", "compose", "json"):
            raise UserError(f"--format {fmt!r}: use shell, systemd, compose or json")
        d, c = build(model, gpu, gpu_memory, gmu, kv_cache_dtype, enforce_eager, mtp, speculative_config,
                     max_num_seqs, max_num_batched_tokens, max_model_len, enable_prefix_caching, tensor_parallel_size,
                     compile_cache, language_model_only, vllm_version, other_gpu_usage)
        p = run(d.with_(auto_fit=True), c)
        if d.max_model_len_given:
            p_given = run(d, c)
            if not p_given.starts:
                raise UserError("; ".join(p_given.reasons))
            mml = d.max_model_len
        else:
            mml = sc.choose_max_model_len(p, margin)
        ckpt = checkpoint or model_arg(d)
        cmd = sc.build_command(d, p, ckpt, mml, port, served_model_name)
        if fmt == "shell":
            text = sc.shell(cmd) + "\n"
        elif fmt == "systemd":
            text = sc.systemd(cmd, f"vLLM {ckpt} (max_model_len {mml}, GMU {d.gmu:.2f}; vrambudget)", user)
        elif fmt == "compose":
            text = sc.compose(cmd, _image_version(d.rules.version), port)
        else:
            text = json.dumps(sc.as_json(cmd), indent=2) + "\n"
        if out:
            from .profiles import write_text_atomic

            if Path(out).exists() and not force:
                raise UserError(f"{out} exists; pass --force to replace it")
            write_text_atomic(Path(out), text)
        else:
            sys.stdout.write(text)
        for w in cmd.warnings:
            typer.echo(f"warning: {w}", err=True)

    run_safely(go)


def _image_version(rules_version: str) -> str:
    return {"0.19": "0.19.1", "0.20": "0.20.2", "0.33": "0.33.0"}.get(rules_version, rules_version)


def _basis(source: str) -> str:
    return "measured" if source.startswith("measured") else \
        "PyTorch reports" if source.startswith("PyTorch") else source.split(":")[0]


@app.command()
def gpus(json_out: JsonOpt = False) -> None:
    """List the GPU catalog (total memory as CUDA reports it, and where each figure comes from)."""

    def go() -> None:
        from tabulate import tabulate

        from .hardware.catalog import catalog

        from .hardware.facts import attention_backend, cuda_context

        cat = catalog()
        if json_out:
            emit_json({k: {"name": v.name, "total_bytes": v.total_bytes, "compute_capability": v.compute_capability,
                           "source": v.source, "sms": v.sms, "architecture": v.architecture,
                           "cuda_context_bytes": cuda_context(v).value, "cuda_context_measured": cuda_context(v).measured,
                           "cuda_context_source": cuda_context(v).source,
                           "attention_backend_fp8_kv": attention_backend(v, "fp8").label,
                           "attention_backend_bf16_kv": attention_backend(v, "bf16").label} for k, v in cat.items()})
            return
        rows = [[k, v.name, f"{v.total_gib:.2f}", _basis(v.source), v.compute_capability, v.sms, v.architecture,
                 f"{cuda_context(v).value / 2**30:.2f}" + ("" if cuda_context(v).measured else " (est.)"),
                 f"{attention_backend(v, 'bf16').label} / {attention_backend(v, 'fp8').label}"] for k, v in cat.items()]
        typer.echo(tabulate(rows, headers=["--gpu", "name", "GiB", "total from", "cc", "SMs", "arch", "context GiB",
                                           "attention bf16 / fp8 KV"], tablefmt="simple", disable_numparse=True))

    run_safely(go)


def _checked_mark(checked: str) -> str:
    if "config equal" in checked:
        return "yes"
    return "bytes" if "checkpoint bytes match" in checked else "NO"


@app.command()
def models(json_out: JsonOpt = False) -> None:
    """List the bundled model profiles with their key figures."""

    def go() -> None:
        from tabulate import tabulate

        from .model.arch import arch_from_config
        from .model.checkpoint import bundled_models
        from .model.weights import parameter_count, weights_from_config

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
                         m["hf_id"] or "(layout of community AWQ)",
                         _checked_mark(m.get("checked", ""))])
        if json_out:
            emit_json(out)
        else:
            typer.echo(tabulate(rows, headers=["--model", "params", "weights GiB", "MTP GiB", "layers", "max len",
                                               "Hugging Face", "config checked"], tablefmt="simple",
                                      disable_numparse=True))
            typer.echo("config checked: yes = field by field against the official config.json; bytes = shapes (and a "
                       "quantized layout) whose bytes equal the checkpoint's (`models --json`: 'checked' says against what, and "
                       "what is not verified)")
            from .model.arch import SLIDING
            from .model.drafter import bundled_drafters, load_drafter
            from .profiles import read_json

            drafters = []
            for name, path in bundled_drafters().items():
                dr, prof = load_drafter(name), read_json(path)
                drafters.append([name, prof["hf_id"], f"{dr.num_layers} ({dr.layer_kinds.count(SLIDING)} sliding)",
                                 f"{dr.num_kv_heads} x {dr.head_dim}", prof["checked"]])
            if drafters:
                typer.echo("\nDFlash drafters (--speculative-config '{\"method\":\"dflash\",\"model\":NAME,...}'):")
                typer.echo(tabulate(drafters, headers=["model", "Hugging Face", "layers", "KV heads x dim", "checked"],
                                    tablefmt="simple", disable_numparse=True))

    run_safely(go)


def _mtp_default(argv: list[str]) -> list[str]:
    """`--mtp` takes an optional K: a bare `--mtp` means K = 2 (typer options need a value)."""
    out = []
    for i, a in enumerate(argv):
        out.append(a)
        if a == "--mtp" and (i + 1 == len(argv) or not argv[i + 1].isdigit()):
            out.append("2")
    return out


def main() -> None:
    sys.argv[1:] = _mtp_default(sys.argv[1:])
    app()


if __name__ == "__main__":
    main()
