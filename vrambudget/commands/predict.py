"""`vrambudget predict`: the whole budget, KV plan and ceiling of one deployment (no GPU needed)."""

from __future__ import annotations

from typing import Any

from ..errors import UserError
from .common import EXIT_NO, Exit, echo, emit_json, run_safely
from .options import JSON, PLOT, TARGET, DeploymentOptions, deployment_command
from .spec import Opt

OWN = (TARGET, PLOT,
       Opt("prompt_tokens", ("--prompt-tokens",), str, None, "Check that a prompt of this many tokens serves after "
           "startup (default: the ceiling)."),
       Opt("available_kv_gib", ("--available-kv-gib",), float, None, "Skip the budget: plan the KV cache for this "
           "much memory (e.g. a log's 'Available KV cache memory')."),
       JSON)


def register(app: Any) -> None:
    deployment_command(app, own=OWN)(predict)


def predict(opts: DeploymentOptions, **own: Any) -> None:
    """The whole budget, KV plan and ceiling for one deployment (no GPU needed)."""
    target_context, plot, prompt_tokens = own["target_context"], own["plot"], own["prompt_tokens"]
    available_kv_gib, json_out = own["available_kv_gib"], own["json_out"]

    def go() -> None:
        from ..output.render import kv_only_text, prediction_text, subject_line
        from ..prediction import answer, kv_only, min_gmu_for_context, predict_json
        from ..prediction import predict as run
        from ..units import parse_tokens

        if available_kv_gib is not None and target_context:
            raise UserError("--available-kv-gib plans a given KV memory and --target-context finds a GMU: give one")
        if plot:  # before any output: a folder, a device, a pipe or a link is refused in one line
            from pathlib import Path

            from ..profiles import check_output

            check_output(Path(plot), "--plot")
        d, c = opts.build()
        if available_kv_gib is not None:
            res = kv_only(d, available_kv_gib)
            emit_json(res) if json_out else echo(kv_only_text(d, available_kv_gib, res))
            return
        if target_context:
            tokens = parse_tokens(target_context, "--target-context")
            if opts.max_model_len is not None and d.max_model_len != tokens:
                raise UserError(f"--target-context {tokens:,} finds the smallest GMU for that max_model_len, "
                                f"--max-model-len {opts.max_model_len} asks about another: give one")
            if opts.gmu is not None:
                raise UserError("--target-context finds the GMU itself; leave --gpu-memory-utilization out (or drop "
                                "--target-context to check that GMU)")
            g = min_gmu_for_context(d, c, tokens)
            if json_out:
                emit_json({"target_context": tokens, "min_gmu": g, "inputs": d.inputs()})
            elif g is None:
                raise UserError(f"{tokens:,} tokens do not start at any GMU on {d.gpu.name} with these flags")
            else:
                echo(f"smallest GMU for max_model_len {tokens:,}: {g:.2f}")
                echo(prediction_text(run(d.with_(gmu=g, max_model_len=tokens, auto_fit=False), c)))
            return
        if d.pp > 1 or len(d.gpus) > 1:  # several workers, each its own budget: the worst decides
            from ..output.render import ranks_text
            from ..parallel import plan_ranks, ranks_json, worst

            plans = plan_ranks(d, c)  # VLLM_PP_LAYER_PARTITION: read once, into d.pp_partition
            bad = worst(plans)
            if json_out:
                emit_json(ranks_json(d, plans, bad))
            else:
                echo(subject_line(d, opts.defaulted()))
                echo(ranks_text(d, plans, bad))
                echo(prediction_text(bad.prediction))
            if not bad.prediction.starts:
                raise Exit(EXIT_NO)
            return
        ans = answer(d, c, prompt_tokens=parse_tokens(prompt_tokens, "--prompt-tokens") if prompt_tokens else None)
        p = ans.asked
        if json_out:
            emit_json(predict_json(ans))
        else:
            echo(subject_line(d, opts.defaulted()))
            echo(prediction_text(p, ans))
        if plot:
            from ..output import plots
            from ..prediction import variants

            ax = plots.budget_bars([("this", p)] + variants(d, c),
                                   title=f"{d.model.ref} on {d.gpu.name}, GMU {d.gmu:.2f}")
            echo(f"plot: {plots.save(ax, plot)}", err=True)
        if not p.starts or (prompt_tokens and not p.runtime.serves):  # exit 0 only where vLLM starts (and serves)
            raise Exit(EXIT_NO)

    run_safely(go)
