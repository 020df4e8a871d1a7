"""Reading a model: a bundled profile, a local folder, or a Hugging Face id (config.json and the
safetensors headers, which give each tensor's exact dtype and shape without downloading weights)."""

from __future__ import annotations

import json
import os
import struct
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable

from .arch import ModelArch, arch_from_config
from ..errors import UserError
from ..profiles import bundled_dir, read_json
from ..units import dtype_bytes
from .weights import INT4_LOAD_METHODS, Int4Load, WeightBytes, buffer_tensors, scheme_from_config

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


def read_safetensors_header(path: Path) -> dict[str, Any]:
    """The JSON header of a .safetensors file (8-byte little-endian length, then JSON)."""
    with open(path, "rb") as fh:
        (n,) = struct.unpack("<Q", fh.read(8))
        if n > 100_000_000:
            raise UserError(f"{path} does not look like a safetensors file")
        return json.loads(fh.read(n))


def _tensors_from_header(header: dict[str, Any]) -> Iterable[TensorInfo]:
    for name, info in header.items():
        if name == "__metadata__":
            continue
        numel = 1
        for d in info["shape"]:
            numel *= d
        yield TensorInfo(name, info["dtype"], numel)


def _local(path: Path) -> ModelSource:
    cfg_path = path / "config.json"
    if not cfg_path.is_file():
        raise UserError(f"{path} has no config.json; point --model at a model folder")
    cfg = read_json(cfg_path)
    tensors: list[TensorInfo] = []
    for st in sorted(path.glob("*.safetensors")):
        if st.stat().st_size >= 8:
            tensors.extend(_tensors_from_header(read_safetensors_header(st)))
    return ModelSource(arch_from_config(cfg, path.name), "local", str(path), f"local folder {path}", tuple(tensors))


def _hub(repo_id: str) -> ModelSource:
    try:
        from huggingface_hub import get_safetensors_metadata, hf_hub_download
        from huggingface_hub.utils import HfHubHTTPError, LocalEntryNotFoundError
    except ImportError:
        raise UserError("reading a Hugging Face id needs huggingface_hub (pip install huggingface_hub)") from None
    names = ", ".join(bundled_models())
    try:
        cfg_file = hf_hub_download(repo_id, "config.json")
    except LocalEntryNotFoundError:
        raise UserError(f"cannot reach the Hugging Face Hub for {repo_id!r} (offline?) and it is not in the local "
                        f"cache; use a bundled model ({names}) or a local folder") from None
    except HfHubHTTPError as e:
        raise UserError(f"Hugging Face Hub refused {repo_id!r}: {str(e).splitlines()[0]}; bundled: {names}") from None
    except Exception as e:  # network stacks raise many types; all mean "could not fetch"
        raise UserError(f"could not fetch config.json of {repo_id!r} ({type(e).__name__}); bundled: {names}") from None
    cfg = read_json(Path(cfg_file))
    tensors: list[TensorInfo] = []
    try:
        meta = get_safetensors_metadata(repo_id)
        for fm in meta.files_metadata.values():
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
    ref = ref or DEFAULT_MODEL
    bundled = bundled_models()
    if ref in bundled:
        m = bundled[ref]
        return ModelSource(arch_from_config(m["config"], ref), "bundled", ref, m["description"])
    path = Path(os.path.expanduser(ref))
    if path.exists():
        return _local(path)
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
    if not total["model"]:
        raise UserError("the safetensors headers list no language-model tensors")
    buffers = sum(t.numel for t in buffer_tensors(arch)) * db
    return WeightBytes(total["model"] + buffers, total["mtp"], total["vision"], "safetensors")
