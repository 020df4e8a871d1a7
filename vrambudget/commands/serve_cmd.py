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
        from ..output import servecmd as sc

        sc.check_format(fmt)
        if vllm_bin is not None and fmt != "systemd":
            raise UserError("--vllm-bin sets a systemd unit's ExecStart: use it with --format systemd")
        d, c = opts.build()
        if d.nodes > 1 and fmt in ("systemd", "compose"):
            raise UserError(f"--nodes {d.nodes} --format {fmt}: one unit per host is not written; --format shell or "
                            "json gives every host's command")
        cmd, notes = sc.command_for(d, c, margin, checkpoint, port, served_model_name, kv_cache_memory)
        if d.nodes > 1:
            cmd.hosts = sc.host_steps(d, cmd.argv, master_addr)
        if fmt == "systemd" and sc.vllm_executable(vllm_bin) is None:
            notes.append(f"no vllm on PATH here: ExecStart holds {sc.VLLM_PLACEHOLDER}; replace it with vLLM's "
                         "absolute path (`which vllm` where it is installed) or pass --vllm-bin")
        text = sc.render(cmd, fmt, f"vLLM {cmd.argv[1]} (max_model_len {cmd.max_model_len}, GMU {d.gmu:.2f}; vrambudget)",
                         d.rules.version, port, user, vllm_bin)
        _write(text, out, force)
        for note in notes:
            echo(f"note: {note}", err=True)
        for w in cmd.warnings:
            echo(f"warning: {w}", err=True)

    run_safely(go)


def _write(text: str, out: str | None, force: bool) -> None:
    """The command to stdout, or to --out: a folder, a device, a pipe or a link refused, --force or not."""
    from pathlib import Path

    if not out:
        sys.stdout.write(text)
        return
    from ..profiles import check_output, write_text_atomic

    check_output(Path(out), "--out")
    if Path(out).exists() and not force:
        raise UserError(f"{out} exists; pass --force to replace it")
    write_text_atomic(Path(out), text, "--out")
