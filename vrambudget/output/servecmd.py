"""`vrambudget serve-cmd`: the `vllm serve` command for a predicted configuration, as a shell line,
a systemd unit, a docker compose service or JSON, with warnings where the configuration is risky."""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from typing import Any

from ..deployment import Deployment
from ..errors import UserError
from ..predict import Prediction

COMPOSE_IMAGE = "vllm/vllm-openai:v{version}"


@dataclass
class ServeCommand:
    argv: list[str]  # argv after the program (vllm serve ...)
    max_model_len: int
    ceiling: int
    warnings: list[str]
    placeholder: str = ""  # how to fill the model's stand-in, where the argv holds one (model_argument)
    hosts: list["HostStep"] = field(default_factory=list)  # several hosts: what each runs, in order (host_steps)


@dataclass(frozen=True)
class HostStep:
    """One command one host runs: its number (0: the head, which serves the API) and its whole argv."""

    host: int
    argv: list[str]


RAY_PORT = 6379
_ADDRESS = re.compile(r"[A-Za-z0-9][A-Za-z0-9.:-]{0,252}")


def host_steps(d: Deployment, argv: list[str], master_addr: str | None) -> list[HostStep]:
    """The commands of a deployment over d.nodes hosts, as its version starts them (VllmRules.multi_host): the same
    `vllm serve` on every host with --nnodes, its --node-rank and the head's --master-addr, the others --headless
    (they run workers, no API server); or a Ray cluster (`ray start` on every host) and `vllm serve
    --distributed-executor-backend ray` on the head."""
    if not master_addr:
        raise UserError(f"--nodes {d.nodes}: give --master-addr, the head host's address the others reach")
    if not _ADDRESS.fullmatch(master_addr):
        raise UserError(f"--master-addr {master_addr!r}: a host name or IP address (letters, digits, '.', ':', '-')")
    if d.rules.multi_host == "nnodes":
        common = ["--nnodes", str(d.nodes), "--master-addr", master_addr]
        return [HostStep(h, ["vllm", *argv, *common, "--node-rank", str(h), *(["--headless"] if h else [])])
                for h in range(d.nodes)]
    ray = [HostStep(0, ["ray", "start", "--head", "--port", str(RAY_PORT)])]
    ray += [HostStep(h, ["ray", "start", "--address", f"{master_addr}:{RAY_PORT}"]) for h in range(1, d.nodes)]
    return ray + [HostStep(0, ["vllm", *argv, "--distributed-executor-backend", "ray"])]


def choose_max_model_len(p: Prediction, margin: str | None) -> int:
    """The predicted ceiling, or `margin` below it ('4096' tokens or '5%'), rounded down to a block."""
    ceiling, block = p.ceiling, p.plan.layout.block_size
    if ceiling <= 0:
        raise UserError("nothing starts with these flags: " + " | ".join(p.reasons or ["no KV cache memory"]))
    if not margin:
        return ceiling
    m = margin.strip()
    try:
        share = float(m[:-1]) if m.endswith("%") else None
        if share is not None and not 0 <= share < 100:
            raise ValueError
        cut = int(ceiling * share / 100) if share is not None else int(m)
        if cut < 0:
            raise ValueError
    except (ValueError, OverflowError):
        raise UserError(f"--margin {margin!r}: write tokens (4096) or a percentage from 0 to 100 (5%): how far "
                        "below the ceiling to stay") from None
    value = (ceiling - cut) // block * block
    if value < block:
        raise UserError(f"--margin {margin} leaves no context below the ceiling {ceiling:,}")
    return value


@dataclass(frozen=True)
class ModelArgument:
    """What `vllm serve` is given as the model. `placeholder` is True where the profile models a layout, not one
    upload: `value` is then a marked stand-in (<your-...-checkpoint>) that the user replaces, and `how` says how."""

    value: str
    placeholder: bool = False
    how: str = ""


def model_argument(d: Deployment, checkpoint: str | None = None) -> ModelArgument:
    """--checkpoint, else the folder or Hub id the model came from, else the bundled profile's Hub id, else a
    placeholder for the profile's layout (the plan is the layout's; only the command's model is left to fill)."""
    if checkpoint:
        return ModelArgument(checkpoint)
    src = d.model
    if src.origin in ("local", "hub"):
        return ModelArgument(src.ref)
    from ..model.checkpoint import bundled_models

    hf_id = bundled_models()[src.ref].get("hf_id")
    if hf_id:
        return ModelArgument(hf_id)
    stand_in = f"<your-{src.ref}-checkpoint>"
    return ModelArgument(stand_in, True, f"{stand_in} stands for your checkpoint: replace it with its folder or "
                         f"Hugging Face id, or pass --checkpoint (the figures are the {src.ref} profile's layout; "
                         "--model with the checkpoint reads its exact bytes)")


def build_command(d: Deployment, p: Prediction, model: ModelArgument, max_model_len: int, port: int,
                  served_name: str | None) -> ServeCommand:
    from ..inputs import check_name

    check_name(model.value, "--checkpoint")
    if served_name is not None:
        check_name(served_name, "--served-model-name")
    if not 1 <= port <= 65535:
        raise UserError(f"--port {port}: a TCP port is 1 to 65535")
    args = ["serve", model.value, "--port", str(port), *d.serve_flags(max_model_len)]
    if served_name:
        args += ["--served-model-name", served_name]
    warnings = list(p.warnings)
    if p.ceiling - max_model_len < p.plan.layout.block_size:
        warnings.append(f"max_model_len {max_model_len:,} is within one block ({p.plan.layout.block_size} tokens) "
                        "of the predicted ceiling: a cold first boot or another process on the GPU can tip it "
                        "over; consider --margin 5%")
    return ServeCommand(args, max_model_len, p.ceiling, warnings, model.how if model.placeholder else "")


def image_version(rules_version: str) -> str:
    """The vllm-openai image tag for a modelled version range."""
    return {"0.19": "0.19.1", "0.20": "0.20.2", "0.26": "0.26.0", "0.33": "0.33.0"}.get(rules_version, rules_version)


FORMATS = ("shell", "systemd", "compose", "json")


def check_format(fmt: str) -> str:
    """`fmt` if it is one of FORMATS, else the one-line error (commands check it before any work)."""
    if fmt not in FORMATS:
        raise UserError(f"--format {fmt!r}: use shell, systemd, compose or json")
    return fmt


def render(cmd: ServeCommand, fmt: str, description: str, rules_version: str, port: int,
           user: str | None = None) -> str:
    """The command as `fmt`: shell | systemd | compose | json."""
    check_format(fmt)
    if fmt == "shell":
        return shell(cmd) + "\n"
    if fmt == "systemd":
        return systemd(cmd, description, user)
    if fmt == "compose":
        return compose(cmd, image_version(rules_version), port)
    return json.dumps(as_json(cmd), indent=2) + "\n"


def shell(cmd: ServeCommand) -> str:
    if cmd.hosts:
        return "\n".join(f"# host {s.host}{' (head)' if s.host == 0 else ''}\n{shlex.join(s.argv)}" for s in cmd.hosts)
    return "vllm " + " ".join(shlex.quote(a) for a in cmd.argv)


def _systemd_escape(text: str) -> str:
    """Text systemd reads literally in a unit: '%' doubled (its specifiers), '$' doubled (ExecStart's variables)."""
    return text.replace("%", "%%").replace("$", "$$")


def _systemd_quote(arg: str) -> str:
    """One ExecStart word as systemd.syntax(7) reads it back: bare where it is plain, else single-quoted with
    backslash and single quote escaped (systemd unescapes C-style within either quotes; JSON stays readable);
    specifiers and variables escaped. Control characters cannot be written (build_command refuses them first)."""
    arg = _systemd_escape(arg)
    if arg and all(c.isalnum() or c in "-_./:=,@+" for c in arg):
        return arg
    return "'" + arg.replace("\\", "\\\\").replace("'", "\\'") + "'"


def systemd(cmd: ServeCommand, description: str, user: str | None) -> str:
    exec_start = " ".join(["/usr/bin/env", "vllm", *(_systemd_quote(a) for a in cmd.argv)])
    if user is not None and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.-]{0,31}|[0-9]{1,10}", user):
        raise UserError(f"--user {user[:40]!r} is not a user name systemd takes (letters, digits, _ . -)")
    lines = ["[Unit]", f"Description={_systemd_escape(description)}", "After=network-online.target", "Wants=network-online.target", "",
             "[Service]", "Type=simple"]
    if user:
        lines.append(f"User={user}")
    lines += [f"ExecStart={exec_start}", "Restart=on-failure", "RestartSec=10",
              "# a first boot after a GMU or graph change recompiles (torch.compile) and profiles a larger peak;",
              "# Restart=on-failure lets the second, warm boot succeed", "TimeoutStartSec=1200", "",
              "[Install]", "WantedBy=multi-user.target", ""]
    return "\n".join(lines)


def compose(cmd: ServeCommand, vllm_version: str, port: int) -> str:
    """A docker compose service; the command is a YAML list, so no shell quoting is involved."""
    items = "\n".join(f"      - {json.dumps(a.replace('$', '$$'), ensure_ascii=False)}" for a in cmd.argv[1:])  # compose interpolates $
    return f"""services:
  vllm:
    image: {COMPOSE_IMAGE.format(version=vllm_version)}
    ipc: host
    ports:
      - "{port}:{port}"
    volumes:
      - ~/.cache/huggingface:/root/.cache/huggingface
    restart: on-failure
    deploy:
      resources:
        reservations:
          devices:
            - driver: nvidia
              count: 1
              capabilities: [gpu]
    command:
{items}
"""


def as_json(cmd: ServeCommand) -> dict[str, Any]:
    extra = {"model_placeholder": cmd.argv[1], "fill": cmd.placeholder} if cmd.placeholder else {}
    hosts = {"hosts": [{"host": s.host, "argv": s.argv, "shell": shlex.join(s.argv)} for s in cmd.hosts]} \
        if cmd.hosts else {}
    return {**extra, "argv": ["vllm", *cmd.argv], "shell": shell(cmd), **hosts, "max_model_len": cmd.max_model_len,
            "ceiling": cmd.ceiling, "warnings": cmd.warnings}
