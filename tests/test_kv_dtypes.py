"""KV cache dtypes as users pass them: fp8 e4m3 / e5m2 and per-token-head int8 / fp8, with the attention backend
vLLM's source gives each (0.20.2 and 0.26.0: FlashAttention reads fp8 only as e4m3 and only as FA3 on Hopper;
per-token-head KV only TRITON_ATTN, its page carrying one fp32 scale per head and token for K and for V)."""

import json

from typer.testing import CliRunner

from vrambudget.cli import app
from vrambudget.hardware.facts import attention_backend
from vrambudget.hardware.catalog import lookup
from vrambudget.kv.spec import AttentionSpec

runner = CliRunner()


def _predict(*args: str) -> dict:
    r = runner.invoke(app, ["predict", "-m", "qwen3.5-9b", "--vllm-version", "0.26.0", "--enforce-eager",
                            "--max-num-seqs", "4", "--json", *args])
    assert r.exit_code == 0, r.output
    return json.loads(r.output)


def test_per_token_head_page_carries_scales():
    spec = AttentionSpec(num_kv_heads=4, head_dim=256, dtype_bytes=1, block_size=16, scale_bytes=4)
    assert spec.page_size_bytes == 16 * 2 * 4 * (256 + 4)  # vLLM: real page + 2 x block x heads x 4 B


def test_backend_per_kv_dtype_and_architecture():
    h100, ampere = lookup("h100"), lookup("rtx3090")
    assert attention_backend(h100, "fp8").label == "FLASH_ATTN (FA3)"
    assert attention_backend(h100, "fp8_e5m2").name == "FLASHINFER"  # FA3 reads e4m3 only
    assert attention_backend(ampere, "fp8_e5m2").name == "FLASHINFER"
    assert attention_backend(ampere, "per_token_head").name == "TRITON_ATTN"
    assert attention_backend(h100, "per_token_head").name == "TRITON_ATTN"


def test_int8_per_token_head_plans_a_larger_block_than_fp8():
    """Qwen3.5-9B on a 3090: the hybrid block holds one GDN state, so wider KV pages (scales) need fewer tokens
    per block: int8-PTH 1040 vs fp8 1056 (multiples of 16)."""
    fp8 = _predict("--gpu", "rtx3090", "--kv-cache-dtype", "fp8")
    pth = _predict("--gpu", "rtx3090", "--kv-cache-dtype", "int8_per_token_head")
    assert (fp8["block_size"], pth["block_size"]) == (1056, 1040)
    assert pth["attention_backend"] == "TRITON_ATTN" and fp8["attention_backend"] == "FLASHINFER"


def test_unmodelled_kv_dtype_is_one_line():
    r = runner.invoke(app, ["predict", "-m", "qwen3.5-9b", "--gpu", "rtx3090", "--kv-cache-dtype", "int4_per_token_head"])
    assert r.exit_code != 0 and "Traceback" not in r.output
    lines = [x for x in r.output.splitlines() if x.strip()]
    assert len(lines) == 1 and "int4_per_token_head" in lines[0] and "int8_per_token_head" in lines[0]
