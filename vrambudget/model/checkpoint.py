"""Reading a model: a bundled profile, a local folder, or a Hugging Face id (config.json and the
safetensors headers, which give each tensor's exact dtype and shape without downloading weights)."""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable

from ..families import arch_from_config
from .arch import ModelArch
from ..errors import UserError
from ..inputs import loads
from ..profiles import bundled_dir, read_json
from ..units import dtype_bytes
from .allocator import rounding_bytes
from .weights import INT4_LOAD_METHODS, Int4Load, allocator_rounding_applies, WeightBytes, buffer_tensors, scheme_from_config

DEFAULT_MODEL = "qwen3.5-9b-awq"
_ST_DTYPE = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "F8_E4M3": 1, "F8_E5M2": 1, "I64": 8, "I32": 4,
             "I16": 2, "I8": 1, "U8": 1, "BOOL": 1, "U32": 4, "U16": 2, "F8_E8M0": 1, "F4": 1}
_FLOAT = {"F64", "F32", "F16", "BF16"}


@dataclass(frozen=True)
class TensorInfo:
    name: str
    dtype: str  # safetensors dtype code, e.g. "BF16", "I32", "F8_E4M3"
    numel: int


@dataclass(frozen=True)
class ModelSource:
    """A resolved --model: its architecture, where it came from, and tensor headers if any."""

    arch: ModelArch
    origin: str  # "bundled", "local" or "hub"
    ref: str
    description: str
    tensors: tuple[TensorInfo, ...] = ()


@lru_cache(maxsize=1)
def bundled_models() -> dict[str, dict[str, Any]]:
    """Bundled model profiles by name (read once; callers must not modify them)."""
    out = {}
    for p in sorted((bundled_dir() / "models").glob("*.json")):
        data = read_json(p)
        out[data["name"]] = data
    return out


_GET_AGAIN = "download it again, or move it out of the folder to size the model from config.json"
_BITS = {"F4": 4}  # sub-byte safetensors dtypes (packed): bits per element


def _open_regular(path: Path, what: str) -> int:
    """A read-only descriptor of `path` if it is a regular file (links followed), else a one-line error: a folder, a
    named pipe (opening one for reading would wait for a writer forever: it is opened O_NONBLOCK and refused), a
    device, a socket, a missing or unreadable file. `what` says what the file should be."""
    try:
        kind = _kind(os.stat(path).st_mode)
        if kind:  # not even opened: opening a device can itself do something
            raise UserError(f"{path} is {kind}, not {what}: move it out of the model folder")
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise UserError(f"{path} does not exist (a broken link?): download it again, or move it out of the model "
                        "folder") from None
    except OSError as e:
        raise UserError(f"cannot read {path}: {e.strerror or e}; make it readable, or move it out of the model "
                        "folder") from None
    try:
        kind = _kind(os.fstat(fd).st_mode)  # swapped since the check above
        if kind:
            raise UserError(f"{path} is {kind}, not {what}: move it out of the model folder")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _kind(mode: int) -> str | None:
    """What a file of this mode is, if not a regular file."""
    import stat

    if stat.S_ISREG(mode):
        return None
    return ("a folder" if stat.S_ISDIR(mode) else "a named pipe (FIFO)" if stat.S_ISFIFO(mode)
            else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode)
            else "not a regular file")


def read_safetensors_header(path: Path) -> tuple[dict[str, Any], int]:
    """The JSON header of a .safetensors file (8-byte little-endian length, then JSON) and the bytes of data after
    it. A file that is not what its header says, or not a regular readable file (a folder, a FIFO, unreadable), is
    a one-line error naming it."""
    fd = _open_regular(path, "a safetensors file")
    size = os.fstat(fd).st_size
    try:
        fh = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    with fh:
        try:
            return _header_of(fh, path, size)
        except OSError as e:
            raise UserError(f"cannot read {path}: {e.strerror or e}; {_GET_AGAIN}") from None


def _header_of(fh: Any, path: Path, size: int) -> tuple[dict[str, Any], int]:
    """The header and data bytes of an open safetensors file of `size` bytes."""
    head = fh.read(8)
    if head.startswith(b"version "):
        raise UserError(f"{path} is a Git LFS pointer, not the weights: run `git lfs pull` in {path.parent}, or "
                        "move it out of the folder to size the model from config.json")
    if len(head) < 8:
        raise UserError(f"{path} is {size} bytes, too short for a safetensors file (an interrupted download?): "
                        + _GET_AGAIN)
    (n,) = struct.unpack("<Q", head)
    if n > size - 8 or n > 100_000_000:
        raise UserError(f"{path}: its header length says {n:,} bytes but the file holds {size - 8:,} after it: "
                        f"truncated, or not a safetensors file; {_GET_AGAIN}")
    raw = fh.read(n)
    try:
        header = loads(raw, str(path))
    except UserError:
        raise UserError(f"{path}: its header is not JSON: the file is damaged or not safetensors; {_GET_AGAIN}") from None
    if not isinstance(header, dict):
        raise UserError(f"{path}: its header is not a JSON object of tensors; {_GET_AGAIN}")
    return header, size - 8 - n


def _tensors_from_header(header: dict[str, Any], path: Path | str, data_bytes: int | None = None) -> Iterable[TensorInfo]:
    """Each tensor of a header, checked: a known dtype, a shape of whole numbers and (with `data_bytes`, a local
    file's) data offsets inside the file that span the shape's bytes."""
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if not isinstance(info, dict):
            raise UserError(f"{path}: tensor {name!r} is described by {info!r}, not an object; {_GET_AGAIN}")
        dtype, shape = info.get("dtype"), info.get("shape")
        if dtype not in _ST_DTYPE:
            raise UserError(f"{path}: tensor {name!r} has dtype {dtype!r}, which vrambudget does not size (known: "
                            f"{', '.join(_ST_DTYPE)})")
        if not isinstance(shape, list) or not all(isinstance(x, int) and not isinstance(x, bool) and x >= 0
                                                  for x in shape):
            raise UserError(f"{path}: tensor {name!r} has shape {shape!r}, not a list of sizes; {_GET_AGAIN}")
        numel = 1
        for d in shape:
            numel *= d
        if data_bytes is not None:
            offsets = info.get("data_offsets")
            if not (isinstance(offsets, list) and len(offsets) == 2 and all(isinstance(x, int) for x in offsets)
                    and 0 <= offsets[0] <= offsets[1]):
                raise UserError(f"{path}: tensor {name!r} has data_offsets {offsets!r}, not [start, end]; {_GET_AGAIN}")
            if offsets[1] > data_bytes:
                raise UserError(f"{path}: tensor {name!r} ends at byte {offsets[1]:,} of data but the file holds "
                                f"{data_bytes:,}: it is truncated; {_GET_AGAIN}")
            want = -(-numel * _BITS.get(dtype, 8 * _ST_DTYPE[dtype]) // 8)
            if offsets[1] - offsets[0] != want:
                raise UserError(f"{path}: tensor {name!r} is {shape} in {dtype}, {want:,} bytes, but its data spans "
                                f"{offsets[1] - offsets[0]:,}: the header lies; {_GET_AGAIN}")
        yield TensorInfo(name, dtype, numel)


def _check_shards(path: Path) -> None:
    """A sharded checkpoint with some shards missing would be sized from part of its weights: say which are."""
    index = path / "model.safetensors.index.json"
    if not os.path.lexists(index):
        return  # a folder, a FIFO or a broken link of that name: read_json says so in one line
    try:
        data = read_json(index)
    except UserError as e:
        raise UserError(f"{e}; download it again or delete it") from None
    weight_map = data.get("weight_map") if isinstance(data, dict) else None
    if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
        raise UserError(f"{index}: weight_map is not an object of tensor -> shard file; download it again or delete it")
    missing = []
    for v in sorted(set(weight_map.values())):
        try:
            kind = _kind(os.stat(path / v).st_mode)
        except FileNotFoundError:
            missing.append(v)
            continue
        except OSError as e:
            raise UserError(f"cannot read {path / v}: {e.strerror or e}; make it readable, or download it "
                            "again") from None
        if kind:  # a shard that is a folder or a pipe is not a missing one: say what it is
            raise UserError(f"{path / v} (a shard {index.name} lists) is {kind}, not a safetensors file: download it "
                            "again, or move it out of the model folder")
    if missing and len(missing) < len(set(weight_map.values())):
        raise UserError(f"{index} lists {len(set(weight_map.values()))} shards and {len(missing)} are missing "
                        f"({missing[0]}{', ...' if len(missing) > 1 else ''}): download them all, or keep only "
                        "config.json to size the model from its shapes")


def _local(path: Path) -> ModelSource:
    if path.is_file():
        raise UserError(f"{path} is a file: --model takes the model's folder (the one holding config.json)")
    cfg_path = path / "config.json"
    if not cfg_path.exists():
        raise UserError(f"{path} has no config.json; point --model at a model folder")
    cfg = read_json(cfg_path, nonfinite=True)
    if not isinstance(cfg, dict):
        raise UserError(f"{cfg_path} is not a JSON object; is it a model's config.json?")
    _check_shards(path)
    tensors: list[TensorInfo] = []
    for st in sorted(path.glob("*.safetensors")):
        header, data_bytes = read_safetensors_header(st)
        tensors.extend(_tensors_from_header(header, st, data_bytes))
    return ModelSource(arch_from_config(cfg, path.name), "local", str(path), f"local folder {path}", tuple(tensors))


def _hub_reachable(timeout: float = 3.0) -> bool:
    """Whether huggingface.co answers a TCP connection within `timeout` s (huggingface_hub itself retries a dead
    network for ~25 s, printing each retry)."""
    import socket
    from urllib.parse import urlparse

    host = urlparse(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    try:
        socket.create_connection((host.hostname or "huggingface.co", host.port or 443), timeout=timeout).close()
        return True
    except OSError:
        return False


def _hub(repo_id: str) -> ModelSource:
    try:
        import logging

        from huggingface_hub import get_safetensors_metadata, hf_hub_download
        from huggingface_hub.utils import HfHubHTTPError, LocalEntryNotFoundError
    except ImportError:
        raise UserError("reading a Hugging Face id needs huggingface_hub (pip install huggingface_hub)") from None
    logging.getLogger("huggingface_hub").setLevel(logging.ERROR)  # its retries would print over our one line
    names = ", ".join(bundled_models())
    cfg_file = None
    try:  # the local cache first: a model used before needs no network
        cfg_file = hf_hub_download(repo_id, "config.json", local_files_only=True)
    except Exception:  # not cached (or an invalid id, which the online call below names)
        pass
    online = cfg_file is None and not os.environ.get("HF_HUB_OFFLINE") and _hub_reachable()
    offline = UserError(f"cannot reach the Hugging Face Hub for {repo_id!r} (offline?) and it is not in the local "
                        f"cache; use a bundled model ({names}) or a local folder")
    if cfg_file is None and not online:
        raise offline
    if cfg_file is None:
        try:
            cfg_file = hf_hub_download(repo_id, "config.json")
        except LocalEntryNotFoundError:
            raise offline from None
        except HfHubHTTPError as e:
            raise UserError(f"Hugging Face Hub refused {repo_id!r}: {str(e).splitlines()[0]}; bundled: {names}") from None
        except Exception as e:  # network stacks raise many types; all mean "could not fetch"
            raise UserError(f"could not fetch config.json of {repo_id!r} ({type(e).__name__}); bundled: {names}") from None
    cfg = read_json(Path(cfg_file), nonfinite=True)
    tensors: list[TensorInfo] = []
    try:
        meta = get_safetensors_metadata(repo_id) if online else None
        for fm in (meta.files_metadata.values() if meta else ()):
            for name, t in fm.tensors.items():
                numel = 1
                for d in t.shape:
                    numel *= d
                tensors.append(TensorInfo(name, t.dtype, numel))
    except Exception:  # no safetensors or no access: fall back to shapes from the config
        tensors = []
    return ModelSource(arch_from_config(cfg, repo_id), "hub", repo_id, f"Hugging Face {repo_id}", tuple(tensors))


def resolve_model(ref: str | None) -> ModelSource:
    """--model: a bundled profile name, a local folder, or a Hugging Face id."""
    from ..inputs import check_name

    ref = check_name(ref or DEFAULT_MODEL, "--model")
    bundled = bundled_models()
    if ref in bundled:
        m = bundled[ref]
        return ModelSource(arch_from_config(m["config"], ref), "bundled", ref, m["description"])
    path = Path(os.path.expanduser(ref))
    if path.exists():
        return _local(path)
    if ref.startswith((".", "/", "~")) or os.sep + os.sep in ref:
        raise UserError(f"--model {ref!r}: no such folder; give a model folder (with its config.json), a Hugging Face "
                        "id (owner/name) or a bundled profile (`vrambudget models`)")
    by_id = {str(m.get("hf_id", "")).lower(): name for name, m in bundled.items() if m.get("hf_id")}
    if ref.lower() in by_id:  # a bundled profile's Hugging Face id: answered offline, from the profile
        name = by_id[ref.lower()]
        m = bundled[name]
        return ModelSource(arch_from_config(m["config"], name), "bundled", name,
                           f"{m['description']} (the bundled profile of {m['hf_id']})")
    if "/" in ref and not ref.startswith((".", "/")):
        return _hub(ref)
    raise UserError(f"unknown model {ref!r}: not a bundled profile ({', '.join(bundled)}), "
                    "not a folder, not a Hugging Face id (owner/name)")


def _part(name: str) -> str:
    if "visual" in name or "vision_tower" in name:
        return "vision"
    if name.startswith("mtp.") or ".mtp." in name:
        return "mtp"
    return "model"


def weights_from_tensors(tensors: Iterable[TensorInfo], arch: ModelArch, *, tp: int = 1,
                         int4: Int4Load = Int4Load()) -> WeightBytes:
    """Exact bytes vLLM holds for the checkpoint's tensors: float tensors load in the model's
    dtype (an fp32 norm becomes bf16), packed/int/fp8 tensors keep their stored size; a 4-bit
    checkpoint's zero points, g_idx and scales as the GPU's kernel loads them (`int4`)."""
    db = dtype_bytes(arch.dtype)
    scheme = scheme_from_config(arch.quantization)
    grouped_int4 = scheme.method in INT4_LOAD_METHODS
    total = {"model": 0, "mtp": 0, "vision": 0}
    matrices: dict[str, list[tuple[str, int]]] = {"model": [], "mtp": [], "vision": []}
    for t in tensors:
        keeps_dtype = t.dtype not in _FLOAT or "scale" in t.name.rsplit(".", 1)[-1]  # quant scales stay as stored
        size = t.numel * (_ST_DTYPE.get(t.dtype, 1) if keeps_dtype else db)
        if t.dtype == "F4":
            size = t.numel // 2
        if grouped_int4 and t.name.endswith("qzeros") and t.dtype == "I32":  # 32 // bits zeros per int32
            size = int(t.numel * 32 // scheme.bits * int4.zero_point_bytes(scheme.symmetric, scheme.bits))
        if grouped_int4 and t.name.endswith("g_idx") and not int4.keeps_g_idx(scheme.act_order):
            size = 0
        if grouped_int4 and t.name.endswith(".scales"):  # one per (group, output)
            size += int(t.numel * int4.extra_bytes_per_group)
        # tensor parallelism shards the large matrices; norms, biases and scales of small size are replicated
        total[_part(t.name)] += size // tp if t.numel > 1_000_000 else size
        matrices[_part(t.name)].append((t.name, size // tp if t.numel > 1_000_000 else size))
    if allocator_rounding_applies(scheme):
        for part, items in matrices.items():  # what torch's allocator keeps beside each large parameter
            total[part] += rounding_bytes(items)
    if not total["model"]:
        raise UserError("the safetensors headers list no language-model tensors")
    buffers = sum(t.numel for t in buffer_tensors(arch)) * db
    return WeightBytes(total["model"] + buffers, total["mtp"], total["vision"], "safetensors")
