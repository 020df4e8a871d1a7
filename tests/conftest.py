import json
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
LOGS = FIXTURES / "vllm-0.20.2-h200" / "logs"
MODELS = FIXTURES / "models"


def log_path(name: str) -> Path:
    return LOGS / name


def fixture_config(model: str) -> dict:
    return json.loads((MODELS / model / "config.json").read_text())


@pytest.fixture(autouse=True)
def isolated_home(tmp_path, monkeypatch):
    """Fitted profiles written by one test must not leak into another (or into the user's)."""
    monkeypatch.setenv("VRAMBUDGET_HOME", str(tmp_path / "home"))
