"""The probe's records: one JSON line per startup in `records.jsonl` (what was asked, what vLLM logged, what the
model predicted, the features `fit` refits from), and one line per verification. Appended atomically; an earlier
runs folder is never overwritten."""

from __future__ import annotations

import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from .. import __version__
from ..budget import features
from ..deployment import Deployment
from ..logparse import LogFacts
from ..profiles import append_jsonl_atomic

SCHEMA = 1


def startup_record(*, d: Deployment, predicted: Any, mode: str, n: int, outcome: str, seconds: float,
                   retry_of_cold_compile: bool, retry_of_mamba_blocks: bool = False, facts: LogFacts, log: Path,
                   gmu: float, max_model_len: int,
                   inputs: dict[str, Any], gpu_key: str, gpu_name: str, driver: str | None,
                   simulated: dict[str, Any] | None, verify: dict[str, Any] | None = None) -> dict[str, Any]:
    """One startup: `d` is the deployment as started (GMU, length, compile state), `predicted` its Prediction."""
    return {
        "schema": SCHEMA, "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "tool": f"vrambudget {__version__}",
        "mode": mode, "attempt": n, "outcome": outcome, "seconds": seconds,
        "retry_of_cold_compile": retry_of_cold_compile, "retry_of_mamba_blocks": retry_of_mamba_blocks,
        "inputs": {**inputs, "gpu_memory_utilization": gmu, "max_model_len": max_model_len},
        "vllm_version": facts.vllm_version, "driver_version": driver, "gpu_name": gpu_name, "gpu_key": gpu_key,
        "features": asdict(features(d)), "facts": facts.to_dict(), "log": str(log),
        "predicted": {"available_kv_bytes": predicted.budget.available_kv_bytes, "ceiling": predicted.ceiling,
                      "activation_bytes": predicted.budget.activation_bytes},
        "verify": verify, "simulated": simulated,
    }


def verify_record(*, n: int, gmu: float, max_model_len: int, verify: dict[str, Any], log: Path,
                  inputs: dict[str, Any]) -> dict[str, Any]:
    """The verification of startup `n`, appended as its own line (`fit` attaches it to that startup)."""
    return {"schema": SCHEMA, "kind": "verify", "attempt": n, "max_model_len": max_model_len, "gmu": gmu,
            "verify": verify, "log": str(log),
            "inputs": {**inputs, "gpu_memory_utilization": gmu, "max_model_len": max_model_len}}


def append(path: Path, rec: dict[str, Any]) -> None:
    """One record as one whole line, appended under a lock with one O_APPEND write; a line an earlier, killed probe
    left torn is ended first (so a resumed probe's record never joins it), and a write the disk refuses is cut back
    off (profiles.append_jsonl_atomic)."""
    append_jsonl_atomic(path, rec)
