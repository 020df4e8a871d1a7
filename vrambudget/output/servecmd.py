"""`vrambudget serve-cmd`: the `vllm serve` command for a predicted configuration, as a shell line,
a systemd unit, a docker compose service or JSON, with warnings where the configuration is risky."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
from dataclasses import dataclass, field
from typing import Any

from ..deployment import Deployment
from ..errors import UserError
from ..prediction import Prediction

COMPOSE_IMAGE = "vllm/vllm-openai:v{version}"


@dataclass
class ServeCommand:
    argv: list[str]  # argv after the program (vllm serve ...)
    max_model_len: int
    ceiling: int
    warnings: list[str]
    placeholder: str = ""  # how to fill the model's stand-in, where the argv holds one (model_argument)
    hosts: list["HostStep"] = field(default_factory=list)  # several hosts: what each runs, in order (host_steps)
    # this machine's files the argv names (the model folder, a DFlash drafter's folder), absolute: compose mounts them
    local_paths: list[str] = field(default_factory=list)


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
    upload: `value` is then a marked stand-in (<your-...-checkpoint>) that the user replaces, and `how` says how.
    `local`: `value` is a path (absolute) on this machine's file system, not a Hub id."""

    value: str
    placeholder: bool = False
    how: str = ""
    local: bool = False


def _looks_like_path(value: str) -> bool:
    """A path, not a Hub id: written as one (/, ./, ../, ~) or naming something here (vLLM, too, loads a path
    that exists before it asks the Hub)."""
    if value in (".", "..") or value.startswith(("/", "./", "../", "~")):
        return True
    try:
        return os.path.exists(os.path.expanduser(value))
    except (OSError, ValueError):
        return False


def absolute_path(value: str) -> str:
    """A local path as every format can use it: '~' expanded, a relative one made absolute from here (a systemd
    unit runs in /, a container elsewhere), an absolute one kept as given; never read by vLLM's argument parser as
    an option (it begins with '/')."""
    path = os.path.expanduser(value)
    return path if os.path.isabs(path) else os.path.abspath(path)


def _hub_id(value: str, what: str) -> str:
    """A Hub id (or a name vLLM resolves) as the model positional: one beginning with '-' would be one of `vllm
    serve`'s options (argparse, and vLLM's own rewriting of '--x_y' and '-x.y' words), and no Hub id does."""
    if value.startswith("-"):
        raise UserError(f"{what} {value[:60]!r} begins with '-', which `vllm serve` reads as an option, and no "
                        f"Hugging Face id does; a folder: write it as ./{value[:60]}")
    return value


def model_argument(d: Deployment, checkpoint: str | None = None) -> ModelArgument:
    """--checkpoint, else the folder or Hub id the model came from, else the bundled profile's Hub id, else a
    placeholder for the profile's layout (the plan is the layout's; only the command's model is left to fill).
    A local folder is given absolute (a unit runs in /, and './-x' is never an option), a Hub id as it is."""
    from ..inputs import check_name

    if checkpoint is not None:
        check_name(checkpoint, "--checkpoint")
        if not checkpoint.strip():
            raise UserError("--checkpoint is empty: give the model's folder or Hugging Face id, or leave it out")
        if _looks_like_path(checkpoint):
            return ModelArgument(absolute_path(checkpoint), local=True)
        return ModelArgument(_hub_id(checkpoint, "--checkpoint"))
    src = d.model
    if src.origin == "local":
        return ModelArgument(absolute_path(src.ref), local=True)
    if src.origin == "hub":
        return ModelArgument(_hub_id(src.ref, "--model"))
    from ..model.checkpoint import bundled_models

    hf_id = bundled_models()[src.ref].get("hf_id")
    if hf_id:
        return ModelArgument(hf_id)
    stand_in = f"<your-{src.ref}-checkpoint>"
    return ModelArgument(stand_in, True, f"{stand_in} stands for your checkpoint: replace it with its folder or "
                         f"Hugging Face id, or pass --checkpoint (the figures are the {src.ref} profile's layout; "
                         "--model with the checkpoint reads its exact bytes)")


def _drafter_for_vllm(d: Deployment, flags: list[str]) -> list[str]:
    """The serve flags with a bundled DFlash drafter named by its Hugging Face id (what vLLM downloads; the bundled
    name is this tool's); a local drafter's folder is already absolute (Deployment.speculative_config)."""
    if d.drafter is None or d.draft_model or "--speculative-config" not in flags:
        return flags
    from ..model.drafter import bundled_drafters
    from ..profiles import read_json

    path = bundled_drafters().get(d.drafter.name)
    hf_id = read_json(path).get("hf_id") if path else None
    i = flags.index("--speculative-config") + 1
    cfg = json.loads(flags[i])
    if hf_id and cfg.get("model") == d.drafter.name:
        cfg["model"] = hf_id
        flags = [*flags[:i], json.dumps(cfg, separators=(",", ":")), *flags[i + 1:]]
    return flags


def build_command(d: Deployment, p: Prediction, model: ModelArgument, max_model_len: int, port: int,
                  served_name: str | None, kv_cache_bytes: int | None = None) -> ServeCommand:
    """`vllm serve` for this deployment; `kv_cache_bytes`: vLLM's --kv-cache-memory in place of the GMU (vLLM 0.33
    gpu_worker.py: it runs the profile, then reserves exactly that for the KV cache and ignores the GMU)."""
    from ..inputs import check_name

    check_name(model.value, "--checkpoint")
    if model.value.startswith("-"):  # model_argument never gives one; a caller's own ModelArgument might
        _hub_id(model.value, "--checkpoint")
    if served_name is not None:
        check_name(served_name, "--served-model-name")
        if not served_name.strip():
            raise UserError("--served-model-name is empty: give the name clients ask for, or leave it out")
    if not 1 <= port <= 65535:
        raise UserError(f"--port {port}: a TCP port is 1 to 65535")
    local = [model.value] if model.local else []
    if d.draft_model:
        check_name(d.draft_model, "the DFlash drafter's folder")
        local.append(d.draft_model)
    flags = _drafter_for_vllm(d, d.serve_flags(max_model_len))
    if kv_cache_bytes is not None:
        flags = _without(flags, "--gpu-memory-utilization") + ["--kv-cache-memory", str(kv_cache_bytes)]
    args = ["serve", model.value, "--port", str(port), *flags]
    if served_name:
        # a name beginning with '-' as its own word would be read as an option (argparse; vLLM rewrites '--a_b' and
        # '-a.b' words too): joined with '=', argparse and vLLM's rewriting take all after the first '=' verbatim
        args += [f"--served-model-name={served_name}"] if served_name.startswith("-") else \
            ["--served-model-name", served_name]
    warnings = list(p.warnings)
    if p.ceiling - max_model_len < p.plan.layout.block_size:
        warnings.append(f"max_model_len {max_model_len:,} is within one block ({p.plan.layout.block_size} tokens) "
                        "of the predicted ceiling: a cold first boot or another process on the GPU can tip it "
                        "over; consider --margin 5%")
    return ServeCommand(args, max_model_len, p.ceiling, warnings, model.how if model.placeholder else "",
                        local_paths=list(dict.fromkeys(local)))


def _without(flags: list[str], option: str) -> list[str]:
    """The flags less one option and its value."""
    out, skip = [], False
    for f in flags:
        if skip:
            skip = False
        elif f == option:
            skip = True
        elif not f.startswith(option + "="):
            out.append(f)
    return out


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
           user: str | None = None, vllm_bin: str | None = None) -> str:
    """The command as `fmt`: shell | systemd | compose | json. `vllm_bin`: systemd's executable (default: the
    `vllm` on PATH here, vllm_executable)."""
    check_format(fmt)
    if fmt == "shell":
        return shell(cmd) + "\n"
    if fmt == "systemd":
        return systemd(cmd, description, user, vllm_bin)
    if fmt == "compose":
        return compose(cmd, image_version(rules_version), port)
    return json.dumps(as_json(cmd), indent=2) + "\n"


def shell(cmd: ServeCommand) -> str:
    if cmd.hosts:
        return "\n".join(f"# host {s.host}{' (head)' if s.host == 0 else ''}\n{shlex.join(s.argv)}" for s in cmd.hosts)
    return "vllm " + " ".join(shlex.quote(a) for a in cmd.argv)


def _systemd_escape(text: str) -> str:
    """Text systemd reads literally in ExecStart: '%' doubled (its specifiers), '$' doubled (its variables)."""
    return text.replace("%", "%%").replace("$", "$$")


# ExecStart's executable where no `vllm` is on PATH here: a path no system has, said in a comment above it
VLLM_PLACEHOLDER = "/ABSOLUTE/PATH/TO/vllm"


def vllm_executable(given: str | None = None) -> str | None:
    """The `vllm` executable for a systemd unit, absolute: `given` (--vllm-bin), else the one on PATH here
    (shutil.which), else None. systemd runs ExecStart with its own PATH, not a venv's, so `/usr/bin/env vllm`
    would not find a vLLM installed in a virtual environment."""
    from ..inputs import check_name

    if given is not None:
        check_name(given, "--vllm-bin")
        if not os.path.isabs(os.path.expanduser(given)):
            raise UserError(f"--vllm-bin {given[:60]!r}: give the vllm executable's absolute path (systemd's "
                            "ExecStart needs one; `which vllm` where vLLM is installed prints it)")
        return os.path.expanduser(given)
    found = shutil.which("vllm")
    if not found or any(not ch.isprintable() for ch in found):
        return None
    return os.path.abspath(found)


def _systemd_quote(arg: str) -> str:
    """One ExecStart word as systemd.syntax(7) reads it back: bare where it is plain, else single-quoted with
    backslash and single quote escaped (systemd unescapes C-style within either quotes; JSON stays readable);
    specifiers and variables escaped. Control characters cannot be written (build_command refuses them first)."""
    arg = _systemd_escape(arg)
    if arg and all(c.isalnum() or c in "-_./:=,@+" for c in arg):
        return arg
    return "'" + arg.replace("\\", "\\\\").replace("'", "\\'") + "'"


def systemd(cmd: ServeCommand, description: str, user: str | None, vllm_bin: str | None = None) -> str:
    """A unit whose ExecStart names vLLM by its absolute path (a unit does not see a venv's PATH) and every file by
    its absolute path (a unit runs in /)."""
    exe = vllm_executable(vllm_bin)
    exec_start = " ".join([_systemd_quote(exe or VLLM_PLACEHOLDER), *(_systemd_quote(a) for a in cmd.argv)])
    if user is not None and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.-]{0,31}|[0-9]{1,10}", user):
        raise UserError(f"--user {user[:40]!r} is not a user name systemd takes (letters, digits, _ . -)")
    # Description expands specifiers ('%'), not variables: '$' stays as it is
    lines = ["[Unit]", f"Description={description.replace('%', '%%')}", "After=network-online.target",
             "Wants=network-online.target", "", "[Service]", "Type=simple"]
    if user:
        lines.append(f"User={user}")
    if exe is None:
        lines.append(f"# ExecStart needs vLLM's absolute path: no vllm on PATH here; replace {VLLM_PLACEHOLDER} with "
                     "what `which vllm` prints where vLLM is installed (or pass --vllm-bin)")
    lines += [f"ExecStart={exec_start}", "Restart=on-failure", "RestartSec=10",
              "# a first boot after a GMU or graph change recompiles (torch.compile) and profiles a larger peak;",
              "# Restart=on-failure lets the second, warm boot succeed", "TimeoutStartSec=1200", "",
              "[Install]", "WantedBy=multi-user.target", ""]
    return "\n".join(lines)


HF_CACHE_IN_CONTAINER = "/root/.cache/huggingface"  # where the service mounts ~/.cache/huggingface
MODELS_IN_CONTAINER = "/models"


def container_paths(local_paths: list[str]) -> dict[str, str]:
    """Each local path the command names -> its path inside the container: under the mounted Hugging Face cache
    where it lies there (a snapshot's links into blobs/ keep working), else /models/<its name>, bind-mounted."""
    hf_cache = os.path.join(os.path.expanduser("~"), ".cache", "huggingface")
    out: dict[str, str] = {}
    for path in local_paths:
        rel = os.path.relpath(path, hf_cache)
        if rel != ".." and not rel.startswith(".." + os.sep) and not os.path.isabs(rel):
            out[path] = HF_CACHE_IN_CONTAINER if rel == "." else f"{HF_CACHE_IN_CONTAINER}/{rel}"
            continue
        name, n = os.path.basename(os.path.normpath(path)), 1
        if name in ("", ".", ".."):
            name = "model"
        target = f"{MODELS_IN_CONTAINER}/{name}"
        while target in out.values():
            n += 1
            target = f"{MODELS_IN_CONTAINER}/{name}-{n}"
        out[path] = target
    return out


def _in_container(argv: list[str], paths: dict[str, str]) -> list[str]:
    """The argv with this machine's paths (the model positional, a drafter in --speculative-config) replaced by
    their paths inside the container."""
    out = list(argv)
    if len(out) > 1 and out[1] in paths:
        out[1] = paths[out[1]]
    if "--speculative-config" in out:
        i = out.index("--speculative-config") + 1
        cfg = json.loads(out[i])
        if isinstance(cfg, dict) and cfg.get("model") in paths:
            cfg["model"] = paths[cfg["model"]]
            out[i] = json.dumps(cfg, separators=(",", ":"))
    return out


def _yaml(text: str) -> str:
    """A YAML double-quoted scalar that compose reads back as `text`: JSON's escapes are YAML's, and '$' doubled
    (compose interpolates variables in every value)."""
    return json.dumps(text.replace("$", "$$"), ensure_ascii=False)


def compose(cmd: ServeCommand, vllm_version: str, port: int) -> str:
    """A docker compose service; the command is a YAML list, so no shell quoting is involved. Local folders are
    bind-mounted (read-only) and the command names them by their path inside the container."""
    paths = container_paths(cmd.local_paths)
    items = "\n".join(f"      - {_yaml(a)}" for a in _in_container(cmd.argv, paths)[1:])
    mounts = "".join(f"""
      - type: bind
        source: {_yaml(host)}
        target: {_yaml(inside)}
        read_only: true""" for host, inside in paths.items() if not inside.startswith(HF_CACHE_IN_CONTAINER))
    return f"""services:
  vllm:
    image: {COMPOSE_IMAGE.format(version=vllm_version)}
    ipc: host
    ports:
      - "{port}:{port}"
    volumes:
      - ~/.cache/huggingface:{HF_CACHE_IN_CONTAINER}{mounts}
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


def command_for(d: Deployment, c, margin: str | None = None, checkpoint: str | None = None, port: int = 8000,
                served_name: str | None = None, kv_cache_memory: bool = False) -> tuple[ServeCommand, list[str]]:
    """The `vllm serve` command for a deployment and the notes beside it: vLLM's default max_num_seqs lowered where
    its Mamba-block check refuses it, max_model_len the given one (refused where it does not start) or the
    predicted ceiling less `margin`, the worker with the fewest blocks deciding; `kv_cache_memory`: vLLM's
    --kv-cache-memory from the budget in place of the GMU."""
    from ..parallel import deciding
    from ..prediction import fit_max_num_seqs

    notes = []
    fitted = fit_max_num_seqs(d, c)
    if fitted.max_num_seqs != d.max_num_seqs:
        notes.append(f"--max-num-seqs {fitted.max_num_seqs}: vLLM's default {d.max_num_seqs} exceeds the Mamba "
                     "cache blocks its CUDA graphs need on this budget, and vLLM refuses it")
        d = fitted
    p = deciding(d.with_(auto_fit=True), c)  # several workers: the one with the fewest blocks
    if d.max_model_len_given:
        p_given = deciding(d, c)
        if not p_given.starts:
            raise UserError("; ".join(p_given.reasons))
        mml = d.max_model_len
    else:
        mml = choose_max_model_len(p, margin)
    model = model_argument(d, checkpoint)
    kv = None
    if kv_cache_memory:
        kv = p.budget.available_kv_bytes
        if kv <= 0:
            raise UserError(f"--kv-cache-memory: this budget leaves no KV memory at GMU {d.gmu:.2f} "
                            f"({kv / 2**30:.2f} GiB): nothing to reserve")
    cmd = build_command(d, p, model, mml, port, served_name, kv_cache_bytes=kv)
    if model.placeholder:
        notes.append(model.how)
    return cmd, notes
