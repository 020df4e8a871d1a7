"""The GPU catalog (profiles/gpus.json), `--gpu auto` through NVML, and `--gpu-memory`."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from enum import Enum
from functools import lru_cache

from ..errors import UserError
from ..profiles import bundled_dir, read_json
from ..units import GiB


class Basis(str, Enum):
    """Where a card's total memory comes from (gpus.json's basis)."""

    MEASURED = "measured"  # CUDA's total, read on the lab host
    LOGGED = "logged"  # a vLLM or torch log on that card
    PUBLISHED = "published"  # PyTorch's or vLLM's own figure as public messages print it
    ESTIMATED = "estimated"  # from a sibling card or nvidia-smi less CUDA's reserve
    GIVEN = "given"  # --gpu-memory
    READ = "read"  # NVML on this machine (--gpu auto, a card not in the catalog)


@dataclass(frozen=True)
class GPU:
    key: str
    name: str
    total_bytes: int  # as CUDA reports it where measured (see the catalog's source field)
    compute_capability: str
    source: str
    used_bytes: int = 0  # memory other processes hold now (only known with --gpu auto)
    sms: int | None = None  # streaming multiprocessors (None: unknown, e.g. --gpu-memory)
    architecture: str = "unknown"  # turing | ampere | ada | hopper | blackwell (12.x) | blackwell-dc (10.x)
    free_bytes: int | None = None  # free memory now, read through NVML (--gpu auto only)
    unified_memory: bool = False  # memory shared with the CPU (GB10): free at startup moves with the host's state
    memory_mib: int | None = None  # the whole memory as nvidia-smi lists it (CUDA's total under WSL 2)
    nvml_memory: bool = True  # NVML reports the memory total (False on the GB10: vLLM then takes its small defaults)
    basis: Basis = Basis.ESTIMATED

    @property
    def is_hopper(self) -> bool:
        return self.compute_capability.startswith("9.")

    @property
    def total_gib(self) -> float:
        return self.total_bytes / GiB

    @property
    def measured(self) -> bool:
        """Total memory measured as CUDA reports it (else PyTorch's public figure or an estimate)."""
        return self.basis is Basis.MEASURED


def architecture_of(compute_capability: str) -> str:
    major, _, minor = compute_capability.partition(".")
    return {"7": "turing" if minor == "5" else "volta", "8": "ada" if minor == "9" else "ampere", "9": "hopper",
            "10": "blackwell-dc", "12": "blackwell"}.get(major, "unknown")


def _norm(name: str) -> str:
    s = name.lower().replace("nvidia", "").replace("geforce", "")
    return re.sub(r"[^a-z0-9]", "", s)


@lru_cache(maxsize=1)
def catalog() -> dict[str, GPU]:
    data = read_json(bundled_dir() / "gpus.json")["gpus"]
    return {k: GPU(k, v["name"], int(v["total_bytes"]), str(v["compute_capability"]), v["source"],
                   sms=v.get("sms"), architecture=v.get("architecture") or architecture_of(str(v["compute_capability"])),
                   unified_memory=bool(v.get("unified_memory")), memory_mib=v.get("memory_mib"),
                   nvml_memory=v.get("nvml_memory", True), basis=Basis(v["basis"]))
            for k, v in data.items()}


@lru_cache(maxsize=1)
def _aliases() -> dict[str, str]:
    data = read_json(bundled_dir() / "gpus.json")["gpus"]
    out: dict[str, str] = {}
    for k, v in data.items():
        for a in [k, v["name"], *v.get("aliases", [])]:
            out[_norm(a)] = k
            out[_norm(a).replace("rtx", "")] = k
    return out


@lru_cache(maxsize=1)
def _ambiguous() -> dict[str, list[str]]:
    data = read_json(bundled_dir() / "gpus.json").get("ambiguous", {})
    return {_norm(k): v for k, v in data.items() if not k.startswith("_")}


def _marketing_gb(g: GPU) -> int:
    """The memory a card is sold with, in GB as its name says (24 for a 4090): nvidia-smi's MiB / 1024, else the
    CUDA total rounded up."""
    return round(g.memory_mib / 1024) if g.memory_mib else math.ceil(g.total_gib)


def _listed(keys: list[str]) -> str:
    return ", ".join(f"{k} ({catalog()[k].name}, {catalog()[k].total_gib:.2f} GiB)" for k in keys)


def _key(n: str) -> str | None:
    return _aliases().get(n) or _aliases().get(n.replace("rtx", ""))


def lookup(name: str) -> GPU:
    """A catalog GPU by key, alias or marketing name, in any case and spelling ('4060ti', 'RTX 4090', 'rtx-4090',
    '4090 24GB', 'A100-80G'). A name that fits several cards ('A100') is refused with the cards it fits; an unknown
    one gets the closest names ('did you mean')."""
    import difflib

    from ..inputs import check_name

    check_name(name, "--gpu")
    n = _norm(name)
    several = _ambiguous().get(n) or _ambiguous().get(n.replace("rtx", ""))
    if several:
        raise UserError(f"--gpu {name!r} fits {len(several)} cards: {_listed(several)}; give one of them")
    key = _key(n)
    bare = re.sub(r"gb?$", "", n) if key is None and re.search(r"\dgb?$", n) else ""
    for digits in (2, 3, 1):  # '4090 24GB': the card named before the memory, if its memory is that
        card_key = _key(bare[:-digits]) if len(bare) > digits else None
        if card_key:
            card, gb = catalog()[card_key], int(bare[-digits:])
            if abs(_marketing_gb(card) - gb) > 2:
                raise UserError(f"--gpu {name!r}: the {card.name} has {_marketing_gb(card)} GB, not {gb}; "
                                "`vrambudget gpus` lists the catalog's cards")
            key = card_key
            break
    if key is None:
        close = list(dict.fromkeys(_aliases()[a] for a in difflib.get_close_matches(n, list(_aliases()), n=6,
                                                                                     cutoff=0.6)))[:3]
        hint = f"did you mean {_listed(close)}? " if close else ""
        raise UserError(f"unknown GPU {name[:60]!r}: {hint}`vrambudget gpus` lists the {len(catalog())} cards of "
                        "the catalog; or --gpu auto to read this machine's, or --gpu-memory 23.5GiB for another card")
    return catalog()[key]


def from_memory(total_bytes: int, compute_capability: str = "8.9") -> GPU:
    if total_bytes < GiB:
        raise UserError(f"--gpu-memory {total_bytes} bytes is less than 1 GiB; write it like 23.5GiB")
    return GPU("custom", f"custom GPU ({total_bytes / GiB:.2f} GiB)", total_bytes, compute_capability,
               "--gpu-memory as given", architecture=architecture_of(compute_capability), basis=Basis.GIVEN)


def detect(index: int = 0) -> GPU:
    """The local GPU through NVML. Known models keep the catalog's measured CUDA total (NVML's
    total is nvidia-smi's, a little above what CUDA reports); memory in use now is recorded."""
    try:
        import pynvml
    except ImportError:
        raise UserError("--gpu auto needs nvidia-ml-py (pip install nvidia-ml-py)") from None
    try:
        pynvml.nvmlInit()
    except Exception as e:  # NVMLError has no stable subclass to catch here
        raise UserError(f"--gpu auto: no NVIDIA driver reachable through NVML ({e}); name the GPU with --gpu") from None
    try:
        h = pynvml.nvmlDeviceGetHandleByIndex(index)
        name = pynvml.nvmlDeviceGetName(h)
        name = name.decode() if isinstance(name, bytes) else name
        mem = pynvml.nvmlDeviceGetMemoryInfo(h)
        major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(h)
        try:
            sms = int(pynvml.nvmlDeviceGetNumGpuCores(h)) // _cores_per_sm(major, minor)
        except Exception:  # older drivers: no core count; the catalog's SM count is used if known
            sms = None
    finally:
        pynvml.nvmlShutdown()
    key, total, source, basis = "auto", int(mem.total), "NVML total of the local GPU (nvidia-smi's, above CUDA's)", \
        Basis.READ
    try:
        known = lookup(name)
        key = known.key  # fitted profiles are filed under the catalog name
        sms = sms or known.sms
        if known.measured:
            total, source, basis = known.total_bytes, known.source, known.basis
    except UserError:
        pass
    cc = f"{major}.{minor}"
    return GPU(key, name, total, cc, source, used_bytes=int(mem.used), sms=sms, architecture=architecture_of(cc),
               free_bytes=int(mem.free), basis=basis)


def _cores_per_sm(major: int, minor: int) -> int:
    """CUDA cores per SM (NVIDIA's CUDA programming guide, arithmetic instructions table)."""
    return 64 if (major, minor) == (8, 0) else 128


def simulated(card: GPU, host: GPU, flag: str = "--simulated-on") -> GPU:
    """`card`'s memory on `host`'s chip (a `probe --simulate-gpu` run): the host's architecture, SMs and kernels decide
    what vLLM does beyond the budget; its CUDA context is the host's. The host must be the bigger card (`flag` names
    the option that asked, in the error)."""
    from dataclasses import replace

    if host.total_bytes <= card.total_bytes:
        raise UserError(f"{flag}: {host.name} ({host.total_gib:.1f} GiB) is not bigger than {card.name} "
                        f"({card.total_gib:.1f} GiB); a simulation runs a smaller card on a bigger GPU")
    return replace(host, name=f"{card.name} (simulated on {host.name})", total_bytes=card.total_bytes,
                   source=card.source, basis=card.basis, free_bytes=None, used_bytes=0)


def resolve(gpu: str | None, gpu_memory: str | None) -> GPU:
    from ..units import parse_size

    if gpu_memory is not None and gpu and gpu.lower() != "auto":  # a card's chip with the memory given (a modded
        card = lookup(gpu)  # 22 GB RTX 2080 Ti, a total measured on this machine): its SMs, kernels and context model
        total = parse_size(gpu_memory, "--gpu-memory")
        if total < GiB:
            raise UserError(f"--gpu-memory {gpu_memory!r} is less than 1 GiB; write it like 23.5GiB")
        return replace(card, total_bytes=total, memory_mib=None, basis=Basis.GIVEN,
                       source=f"--gpu-memory as given ({total / GiB:.2f} GiB), on the {card.name}'s chip")
    if gpu_memory is not None:
        return from_memory(parse_size(gpu_memory, "--gpu-memory"))
    if not gpu:
        return lookup("rtx4060ti")
    if gpu.lower() == "auto":
        return detect()
    return lookup(gpu)
