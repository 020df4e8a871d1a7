"""Fitted coefficients of the measured budget terms, each with its unit and source.

Lookup order: a profile the user fitted for this GPU + model + vLLM version, then one for this
GPU + version, then this version's bundled profile (which may inherit another version's values).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import UserError
from .profiles import bundled_dir, read_json, user_dir


@dataclass(frozen=True)
class Coefficient:
    name: str
    value: float
    unit: str
    source: str
    low: float | None = None  # the lowest and highest values its measurements showed (None: the value)
    high: float | None = None

    def __post_init__(self) -> None:
        if self.low is None:
            object.__setattr__(self, "low", self.value)
        if self.high is None:
            object.__setattr__(self, "high", self.value)


class Coefficients:
    """A name -> Coefficient mapping with the profile files it was read from."""

    def __init__(self, items: dict[str, Coefficient], origins: list[str]):
        self.items = items
        self.origins = origins

    def __getitem__(self, name: str) -> float:
        try:
            return self.items[name].value
        except KeyError:
            raise UserError(f"coefficient {name!r} missing from profiles {self.origins}") from None

    def get(self, name: str, default: float) -> float:
        """A coefficient that older profiles do not carry, with the value that reproduces them."""
        c = self.items.get(name)
        return c.value if c else default


def _read(path: Path, fix: str = "") -> dict[str, Any]:
    """A coefficient profile, checked: every coefficient an object with a numeric value (and bounds). `fix` is
    appended to an error (a user's fitted profile: how to replace it)."""
    try:
        data = read_json(path)
    except UserError as e:
        raise UserError(f"{e}{fix}") from None
    if not isinstance(data, dict) or not isinstance(data.get("coefficients"), dict):
        raise UserError(f"{path} is not a coefficient profile (no 'coefficients' object){fix}")
    for k, v in data["coefficients"].items():
        numbers = [v.get(x) for x in ("value", "low", "high")] if isinstance(v, dict) else ["?"]
        if not isinstance(v, dict) or not all(x is None or (isinstance(x, (int, float)) and not isinstance(x, bool))
                                              for x in numbers) or numbers[0] is None:
            raise UserError(f"{path}: coefficient {k!r} is {v!r}, not {{'value': number, ...}}{fix}")
    return data


def _bundled(version: str, seen: tuple[str, ...] = (), leave_out: str | None = None
             ) -> tuple[dict[str, Coefficient], list[str]]:
    """This version's bundled coefficients over those it inherits. A coefficient taken from public logs names them
    in 'from_logs', each of which alone shows its value; with `leave_out` the only one, it is skipped (the inherited
    value stands): a log never predicts itself (benchmarks/accuracy.py scores the public logs leave-one-out).
    A name 'x@arch' is x on that GPU architecture (features.Features.architecture)."""
    path = bundled_dir() / "coefficients" / f"vllm-{version}.json"
    if not path.is_file():
        raise UserError(f"no bundled coefficients for vLLM {version}")
    data = _read(path)
    items: dict[str, Coefficient] = {}
    origins = [str(path)]
    parent = data.get("inherits")
    if parent and parent not in seen:
        items, more = _bundled(parent, seen + (version,), leave_out)
        origins = more + origins
    for k, v in data["coefficients"].items():
        if leave_out and set(v.get("from_logs", ())) == {leave_out}:
            continue
        items[k] = _coefficient(k, v, v.get("source", ""))
    return items, origins


def _coefficient(name: str, v: dict[str, Any], source: str) -> Coefficient:
    low, high = v.get("low"), v.get("high")
    return Coefficient(name, float(v["value"]), v.get("unit", ""), source,
                       float(low) if low is not None else None, float(high) if high is not None else None)


def fitted_profile_path(gpu_key: str, model: str | None, version: str) -> Path:
    """Where `vrambudget fit` writes (and `predict` reads) a fitted profile."""
    import re

    from .inputs import safe_name

    # a model's id or folder becomes one file name: '/' as '--', anything else outside [A-Za-z0-9._+-] as '-'
    model_part = re.sub(r"[^A-Za-z0-9._+-]", "-", (model or "any").replace("/", "--")).lstrip(".-")[:120] or "model"
    return (user_dir() / "profiles" / f"vllm-{safe_name(version, 'vLLM version')}"
            / f"{safe_name(gpu_key, 'GPU key')}__{model_part}.json")


def load(version: str, gpu_key: str | None = None, model: str | None = None,
         extra: list[Path] | None = None, leave_out: str | None = None) -> Coefficients:
    """The coefficients for this version (and GPU and model, where `fit` wrote a profile here); `leave_out`: a
    public log's name (tests/fixtures/public-logs) whose own figures must not be used (see _bundled)."""
    items, origins = _bundled(version, leave_out=leave_out)
    layers: list[Path] = []
    if gpu_key:
        layers += [fitted_profile_path(gpu_key, None, version), fitted_profile_path(gpu_key, model, version)]
    layers += extra or []
    for p in layers:
        if p.is_file():
            fix = "; delete it to use the bundled profile, or refit it with `vrambudget fit` (it was fitted here)"
            for k, v in _read(p, fix)["coefficients"].items():
                items[k] = _coefficient(k, v, v.get("source", str(p)))
            origins.append(str(p))
    return Coefficients(items, origins)
