"""Right on the user's own card (issue 8): CUDA context per GPU, warn-not-refuse on an estimate, the
attention backend vLLM picks, and the mission's RTX 4060 Ti deployment."""

import json
import re

from typer.testing import CliRunner

from vrambudget import coefficients
from vrambudget.hardware import catalog as gpus
from vrambudget.model.checkpoint import resolve_model
from vrambudget.cli import app
from vrambudget.deployment import Flags, resolve
from vrambudget.hardware.facts import attention_backend, cuda_context
from vrambudget.prediction import predict
from vrambudget.units import GiB

from .conftest import FIXTURES
from vrambudget.vllm_rules import rules_for

from .conftest import FIXTURES

runner = CliRunner()


def mission(gmu, mtp, eager=True, mml=None, **kw):
    d = resolve(resolve_model("qwen3.5-9b-awq"), gpus.lookup("4060ti"), rules_for("0.20.2"),
                Flags(gpu_memory_utilization=gmu, kv_cache_dtype="fp8", num_speculative_tokens=mtp, max_num_seqs=8,
                      enforce_eager=eager, max_model_len=mml, enable_prefix_caching=True, **kw))
    return predict(d, coefficients.load("0.20"))


def test_mission_eager_gmu_097_mtp_and_099_240k_start():
    """spec/mission.md: that user ran GMU 0.97 (eager, MTP 2) and 0.99 (eager, no MTP, ~240K tokens)."""
    p97 = mission(0.97, 2, mml=-1)
    p99 = mission(0.99, 0, mml=240000)
    assert p97.starts and p97.ceiling > 100_000, p97.reasons
    assert p99.starts, p99.reasons
    # the 4060 Ti's context is an estimate: nothing about free memory is a refusal
    assert not any("free memory" in r for r in p97.reasons + p99.reasons)


def test_context_model_respects_the_4060ti_bound_and_the_measured_hoppers():
    c4060 = cuda_context(gpus.lookup("4060ti"))
    assert not c4060.measured and c4060.value <= int(0.157 * GiB) + 2**20
    assert cuda_context(gpus.lookup("h200")).measured and cuda_context(gpus.lookup("h200")).value == 547608330
    lab = (FIXTURES / "lab-vllm-0.20.2-h100" / "ctx.log").read_text()
    used = int(re.search(r"used_after_init (\d+)", lab).group(1))
    h100 = cuda_context(gpus.lookup("h100"))
    assert h100.measured and h100.value == used  # the lab reading, kept as measured data
    ctx = {k: cuda_context(g).value for k, g in gpus.catalog().items()}
    assert ctx["rtx3060"] < ctx["rtx3090"] < ctx["rtx4090"] < ctx["rtx5090"]  # grows with the SM count


def test_estimated_context_warns_with_the_margin_but_certain_shortfall_refuses():
    p = mission(0.995, 0, mml=32768)
    assert p.starts and any("free memory at start" in w and "estimate" in w for w in p.warnings)
    # other processes holding 1 GiB: short even with no context at all -> certain refusal
    q = mission(0.99, 0, mml=32768, other_gpu_bytes=GiB)
    assert not q.starts and "Free memory on device" in q.reasons[0] and q.refusals[0].check == "free_memory_below_budget"


def test_gpu_auto_reads_free_memory_through_nvml(monkeypatch):
    class Mem:
        total, used, free = 16857746637 + 600 * 2**20, 2 * GiB, 16857746637 + 600 * 2**20 - 2 * GiB

    class NVML:
        def nvmlInit(self): pass
        def nvmlShutdown(self): pass
        def nvmlDeviceGetHandleByIndex(self, i): return 0
        def nvmlDeviceGetName(self, h): return "NVIDIA GeForce RTX 4060 Ti"
        def nvmlDeviceGetMemoryInfo(self, h): return Mem()
        def nvmlDeviceGetCudaComputeCapability(self, h): return (8, 9)
        def nvmlDeviceGetNumGpuCores(self, h): return 4352

    monkeypatch.setitem(__import__("sys").modules, "pynvml", NVML())
    g = gpus.detect()
    assert g.key == "rtx4060ti" and g.sms == 34 and g.architecture == "ada" and g.free_bytes == Mem.free
    r = runner.invoke(app, ["predict", "--gpu", "auto", "--gmu", "0.95", "--max-model-len", "4096", "--json",
                            "--vllm-version", "0.20.2"])
    out = json.loads(r.output)
    assert out["free_at_start_bytes"] == Mem.free - out["cuda_context_bytes"]


def test_attention_backend_per_architecture_and_kv_dtype():
    assert attention_backend(gpus.lookup("h100"), "fp8").label == "FLASH_ATTN (FA3)"
    assert attention_backend(gpus.lookup("4060ti"), "fp8").name == "FLASHINFER"  # FA reads fp8 KV only as FA3
    assert attention_backend(gpus.lookup("3090"), "bf16").label == "FLASH_ATTN (FA2)"
    r = runner.invoke(app, ["predict", "--gpu", "3090", "--kv-cache-dtype", "fp8", "--json"])
    out = json.loads(r.output)
    assert out["attention_backend"] == "FLASHINFER" and out["gdn_prefill_path"] == "Triton/FLA"
    assert any("CUDA context" in t for t in out["estimated_terms"])


def test_gpus_lists_sms_and_architecture():
    out = json.loads(runner.invoke(app, ["gpus", "--json"]).output)
    assert out["rtx4090"]["sms"] == 128 and out["rtx4090"]["architecture"] == "ada"
    assert out["h100"]["cuda_context_measured"] is True and out["rtx3090"]["cuda_context_measured"] is False
    assert "SMs" in runner.invoke(app, ["gpus"]).output


def test_corrected_vision_towers_in_the_fixture_configs():
    cfg = json.loads((FIXTURES / "models" / "qwen3.5-0.8b" / "config.json").read_text())["vision_config"]
    assert (cfg["depth"], cfg["hidden_size"], cfg["intermediate_size"], cfg["num_heads"]) == (12, 768, 3072, 12)
    cfg = json.loads((FIXTURES / "models" / "qwen3.5-4b" / "config.json").read_text())["vision_config"]
    assert (cfg["depth"], cfg["hidden_size"], cfg["intermediate_size"]) == (24, 1024, 4096)


def test_3090_qwen35_08b_with_tower_and_mtp_weights():
    """A real RTX 3090 startup of Qwen3.5-0.8B with its vision tower and MTP 2 logged "Model loading took
    1.76 GiB" (../shared/spec/vllm-memory-model.md); the bundled profile now carries the official
    0.8B tower (12 blocks, 768 wide), not the 9B's, and is within 0.06 GiB."""
    from vrambudget import coefficients
    from vrambudget.hardware import catalog as gpus
    from vrambudget.model.checkpoint import resolve_model
    from vrambudget.deployment import Flags, resolve
    from vrambudget.prediction import predict
    from vrambudget.vllm_rules import rules_for

    d = resolve(resolve_model("qwen3.5-0.8b"), gpus.lookup("rtx3090"), rules_for("0.20.2"),
                Flags(num_speculative_tokens=2, language_model_only=False))
    b = predict(d, coefficients.load("0.20")).budget
    assert abs((b.weights_bytes + b.mtp_weights_bytes) / 2**30 - 1.76) <= 0.06


def test_checked_profiles_equal_the_official_configs():
    import json

    from vrambudget.model.checkpoint import bundled_models

    official = FIXTURES / "models"
    for name, m in bundled_models().items():
        if "config equal" in m.get("checked", ""):
            assert m["config"] == json.loads((official / name / "config.json").read_text()), name


def test_5090_total_is_the_one_vllm_logged():
    """club-3090 issue #1087 (2x RTX 5090): "Free memory on device (30.27/31.4 GiB) on startup"."""
    g = gpus.lookup("rtx5090")
    assert round(g.total_bytes / GiB, 2) == 31.4 and "issues/1087" in g.source


def test_a_simulation_needs_the_bigger_card_on_both_paths(monkeypatch):
    """hardware.catalog.simulated holds the rule for predict --simulated-on and probe --simulate-gpu alike."""
    import pytest

    from vrambudget.errors import UserError
    from vrambudget.probe import session

    small, big = gpus.lookup("rtx4060ti"), gpus.lookup("h100")
    assert gpus.simulated(small, big).total_bytes == small.total_bytes
    with pytest.raises(UserError, match="--simulated-on: NVIDIA GeForce RTX 4060 Ti 16GB .* is not bigger than"):
        gpus.simulated(big, small)
    monkeypatch.setattr(gpus, "detect", lambda index=0: small)
    with pytest.raises(UserError, match="--simulate-gpu .* is not bigger than NVIDIA H100"):
        session.simulation(big, None)
    monkeypatch.setattr(gpus, "detect", lambda index=0: big)
    opts, runs = session.simulation(small, "15.56GiB")
    assert runs.architecture == "hopper" and runs.total_bytes == small.total_bytes
    assert opts["simulate_free_bytes"] == int(15.56 * 2**30) and opts["real_total_bytes"] == big.total_bytes


def test_every_cards_total_says_its_basis_as_data():
    from vrambudget.hardware.catalog import Basis, catalog

    cat = catalog()
    assert {g.basis for g in cat.values()} <= {Basis.MEASURED, Basis.LOGGED, Basis.PUBLISHED, Basis.ESTIMATED}
    assert {k for k, g in cat.items() if g.measured} == {"h100", "h200"}  # the lab's own cards
    for g in cat.values():  # the basis and the source's words agree
        assert (g.basis is Basis.ESTIMATED) == g.source.startswith("estimate"), g.key
        assert (g.basis is Basis.PUBLISHED) == g.source.startswith(("PyTorch's", "vLLM's")), g.key
