"""`vrambudget plan`: the fastest configuration that serves a wanted context, and its `vllm serve` command."""

from __future__ import annotations

from typing import Annotated, Any, Optional

import typer

from .common import EXIT_NO, Exit, echo, emit_json, run_safely
from .options import DeploymentOptions, JSON, deployment_command

JsonOpt = JSON.typer_param()[0]


def register(app: typer.Typer) -> None:
    deployment_command(app, "plan", exclude=("gmu", "enforce_eager", "mtp", "speculative_config", "max_model_len",
                                             "compile_cache", "attention_backend"))(plan)


def plan(opts: DeploymentOptions,
         target_context: Annotated[str, typer.Option("--target-context", help="The context you want to serve "
                                                     "(tokens: 65536, 64k).")],
         mtp: Annotated[int, typer.Option("--mtp", min=1, max=8, help="MTP tokens of the MTP options.")] = 2,
         fmt: Annotated[str, typer.Option("--format", help="How to print the chosen command: shell | systemd | "
                                          "compose | json.")] = "shell",
         checkpoint: Annotated[Optional[str], typer.Option("--checkpoint", help="Model argument of the command.")] = None,
         json_out: JsonOpt = False) -> None:
    """The fastest configuration that serves a wanted context: CUDA graphs + MTP, graphs, eager + MTP,
    eager (in that order), with the GMU each needs, what its first boot does, and the command."""

    def go() -> None:
        from tabulate import tabulate

        from ..output import servecmd as sc
        from ..fastest import best as choose
        from ..fastest import plan as run_plan
        from ..fastest import what_would
        from ..prediction import predict as run
        from ..units import parse_tokens

        sc.check_format(fmt)
        tokens = parse_tokens(target_context, "--target-context")
        d, c = opts.with_(mtp=0, max_model_len=str(tokens), compile_cache="warm").build()
        from ..parallel import one_budget_only

        one_budget_only(d, "plan")
        options = run_plan(d, c, tokens, mtp)
        best = choose(options)
        rows = [[o.label, f"{o.gmu_restart:.2f}" if o.gmu_restart else "-",
                 ("same" if o.enforce_eager else f"{o.gmu_first_boot:.2f}" if o.gmu_first_boot else "fails")
                 if o.gmu_restart else "-", f"{o.max_serving_gmu:.2f}" if o.max_serving_gmu else "-",
                 (o.verdict or "no") if o.serves else "no"] for o in options]
        result: dict[str, Any] = {"target_context": tokens, "options": [o.__dict__ | {"gmu": o.gmu} for o in options],
                                  "inputs": d.inputs()}
        text = [f"{tokens:,} tokens of {d.model.ref} on {d.gpu.name}, {d.version_label}, KV {d.kv_cache_dtype}",
                tabulate(rows, headers=["configuration", "GMU (restart)", "GMU (first boot)", "serves up to GMU",
                                        "serves"], tablefmt="simple", disable_numparse=True)]
        if best is None:
            text.append(f"Nothing serves {tokens:,} tokens here. " + what_would(d, c, tokens))
            result["suggestion"] = text[-1]
        else:
            dd = d.with_(enforce_eager=best.enforce_eager, spec_tokens=mtp if best.mtp else 0, speculative_method="mtp",
                         gmu=best.gmu, compile_cache="warm", attention_backend=best.attention_backend)
            if best.max_num_seqs is not None:
                dd = dd.with_(max_num_seqs=best.max_num_seqs)
            model = sc.model_argument(dd, checkpoint)
            cmd = sc.build_command(dd, run(dd, c), model, tokens, 8000, None)
            first = ("" if best.enforce_eager or (best.gmu_first_boot and best.gmu_first_boot <= best.gmu) else
                     " Its first boot after a change compiles cold and fails at this GMU; the restart starts "
                     "(Restart=on-failure in the systemd unit).")
            edge = ("" if best.verdict == "yes" else " It is at the edge: `vrambudget predict` with these flags names "
                    "the unknown that decides it.")
            seqs = (f" With --max-num-seqs {best.max_num_seqs}: vLLM's default {d.max_num_seqs} exceeds the Mamba "
                    "cache blocks its CUDA graphs need, and vLLM refuses it." if best.max_num_seqs is not None else "")
            text.append(f"Fastest that serves: {best.label} at GMU {best.gmu:.2f}.{first}{edge}{seqs}"
                        + (" TRITON_ATTN avoids FlashInfer's workspaces; its decode speed against FlashInfer's is "
                           "not measured here." if best.attention_backend == "TRITON_ATTN" else ""))
            text.append(sc.render(cmd, fmt, f"vLLM {cmd.argv[1]} (max_model_len {tokens}, GMU {best.gmu:.2f}; "
                                             "vrambudget)", d.rules.version, 8000).rstrip("\n"))
            if model.placeholder:
                text.append(f"note: {model.how}")
            result["chosen"] = best.label
            result["command"] = sc.as_json(cmd)
        if json_out:
            emit_json(result)
        else:
            echo("\n".join(text))
        if best is None:
            raise Exit(EXIT_NO)

    run_safely(go)
