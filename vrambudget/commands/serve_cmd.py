"""`vrambudget serve-cmd`: the `vllm serve` command for a configuration, as shell, systemd, compose or JSON."""

from __future__ import annotations

import sys
from typing import Annotated, Optional

import typer

from ..errors import UserError
from .common import echo, run_safely
from .options import DeploymentOptions, deployment_command


def register(app: typer.Typer) -> None:
    deployment_command(app, "serve-cmd", exclude=("attention_backend",))(serve_cmd)


def serve_cmd(opts: DeploymentOptions,
              margin: Annotated[Optional[str], typer.Option("--margin", help="Stay this far below the predicted "
                                                            "ceiling: tokens (4096) or a share (5%).")] = None,
              fmt: Annotated[str, typer.Option("--format", help="shell | systemd | compose | json")] = "shell",
              checkpoint: Annotated[Optional[str], typer.Option("--checkpoint", help="Model argument of the command "
                                    "(default: the profile's Hugging Face id, or --model's folder/id).")] = None,
              port: Annotated[int, typer.Option("--port")] = 8000,
              served_model_name: Annotated[Optional[str], typer.Option("--served-model-name")] = None,
              user: Annotated[Optional[str], typer.Option("--user", help="systemd: run as this user.")] = None,
              vllm_bin: Annotated[Optional[str], typer.Option("--vllm-bin", help="systemd: the vllm executable's "
                                  "absolute path for ExecStart (default: the vllm on PATH here).")] = None,
              master_addr: Annotated[Optional[str], typer.Option("--master-addr", help="With --nodes: the head "
                                     "host's address the other hosts reach.")] = None,
              kv_cache_memory: Annotated[bool, typer.Option("--kv-cache-memory", help="Write vLLM's --kv-cache-memory "
                                         "(bytes) instead of the GMU: the KV memory this budget leaves at the GMU, "
                                         "the CUDA-graph memory counted once (vLLM's own suggestion counts it twice "
                                         "in some versions). vLLM then reserves exactly that and ignores the GMU.")]
              = False,
              out: Annotated[Optional[str], typer.Option("--out", help="Write to this file instead of stdout.")] = None,
              force: Annotated[bool, typer.Option("--force", help="Replace --out if it exists.")] = False) -> None:
    """Print the `vllm serve` command for a configuration (max_model_len: the predicted ceiling or
    --margin below it) as a shell line, a systemd unit, a docker compose service or JSON."""

    def go() -> None:
        from pathlib import Path

        from ..output import servecmd as sc

        from ..prediction import fit_max_num_seqs

        sc.check_format(fmt)
        if vllm_bin is not None and fmt != "systemd":
            raise UserError("--vllm-bin sets a systemd unit's ExecStart: use it with --format systemd")
        d, c = opts.build()
        if d.nodes > 1 and fmt in ("systemd", "compose"):
            raise UserError(f"--nodes {d.nodes} --format {fmt}: one unit per host is not written; --format shell or "
                            "json gives every host's command")
        fitted = fit_max_num_seqs(d, c)  # vLLM's default max_num_seqs lowered where its Mamba-block check refuses it
        notes = []
        if fitted.max_num_seqs != d.max_num_seqs:
            notes.append(f"--max-num-seqs {fitted.max_num_seqs}: vLLM's default {d.max_num_seqs} exceeds the Mamba "
                         "cache blocks its CUDA graphs need on this budget, and vLLM refuses it")
            d = fitted
        from ..parallel import deciding

        p = deciding(d.with_(auto_fit=True), c)  # several workers: the one with the fewest blocks
        if d.max_model_len_given:
            p_given = deciding(d, c)
            if not p_given.starts:
                raise UserError("; ".join(p_given.reasons))
            mml = d.max_model_len
        else:
            mml = sc.choose_max_model_len(p, margin)
        model = sc.model_argument(d, checkpoint)
        kv_bytes = None
        if kv_cache_memory:
            kv_bytes = p.budget.available_kv_bytes
            if kv_bytes <= 0:
                raise UserError(f"--kv-cache-memory: this budget leaves no KV memory at GMU {d.gmu:.2f} "
                                f"({kv_bytes / 2**30:.2f} GiB): nothing to reserve")
        cmd = sc.build_command(d, p, model, mml, port, served_model_name, kv_cache_bytes=kv_bytes)
        if d.nodes > 1:
            cmd.hosts = sc.host_steps(d, cmd.argv, master_addr)
        if model.placeholder:
            notes.append(model.how)
        if fmt == "systemd" and sc.vllm_executable(vllm_bin) is None:
            notes.append(f"no vllm on PATH here: ExecStart holds {sc.VLLM_PLACEHOLDER}; replace it with vLLM's "
                         "absolute path (`which vllm` where it is installed) or pass --vllm-bin")
        text = sc.render(cmd, fmt, f"vLLM {model.value} (max_model_len {mml}, GMU {d.gmu:.2f}; vrambudget)",
                         d.rules.version, port, user, vllm_bin)
        if out:
            from ..profiles import check_output, write_text_atomic

            check_output(Path(out), "--out")  # a folder, a device, a pipe, a link: refused, --force or not
            if Path(out).exists() and not force:
                raise UserError(f"{out} exists; pass --force to replace it")
            write_text_atomic(Path(out), text, "--out")
        else:
            sys.stdout.write(text)
        for note in notes:
            echo(f"note: {note}", err=True)
        for w in cmd.warnings:
            echo(f"warning: {w}", err=True)

    run_safely(go)
