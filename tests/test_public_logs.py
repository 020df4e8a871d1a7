"""Startup lines other people published on their own cards (tests/fixtures/public-logs, sources.json):
the KV plan from the logged available memory must reproduce vLLM's logged KV cache size and
concurrency exactly. Their budgets use checkpoints this tool does not model (named in sources.json)."""

import json

import pytest

from vrambudget import gpus
from vrambudget.explain import deployment_from_log
from vrambudget.logparse import parse_log
from vrambudget.planner import plan_kv
from vrambudget.predict import layout_for
from vrambudget.units import GiB

from .conftest import FIXTURES

PUBLIC = FIXTURES / "public-logs"
SOURCES = {k: v for k, v in json.loads((PUBLIC / "sources.json").read_text()).items() if not k.startswith("_")}


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_public_log_kv_plan_is_exact(name):
    src = SOURCES[name]
    assert src["source"].startswith("https://github.com/") and src["unknown_terms"]
    f = parse_log((PUBLIC / name).read_text())
    d = deployment_from_log(f, src["model"], gpus.lookup(src["gpu"]))
    plan = plan_kv(layout_for(d), round(f.available_kv_gib * GiB), f.max_model_len, d.rules)
    assert plan.kv_cache_tokens == f.kv_cache_tokens
    assert f.concurrency_len == f.max_model_len and round(plan.max_concurrency, 2) == f.concurrency
