"""Weights: quantized byte formulas, and exact sizing from safetensors headers agreeing with them."""

import json
import struct

import pytest

from vrambudget.hardware import catalog as gpus
from vrambudget.families import arch_from_config
from vrambudget.budget import weight_bytes
from vrambudget.model.checkpoint import resolve_model
from vrambudget.errors import UserError
from vrambudget.model.weights import QuantScheme, model_tensors, scheme_from_config, weights_from_config

from .conftest import fixture_config


def test_bf16_weights_match_logged_model_loading():
    # 'Model loading took 16.8 GiB' (9B) and 15.27 (Qwen3-8B) include ~0.10 / ~0.004 GiB load overhead; the
    # rotary cos/sin caches (9B: 262,144 x 64 x 2 B = 32 MiB; Qwen3-8B: 40,960 x 128 x 2 B = 10 MiB) are counted
    w9 = weights_from_config(arch_from_config(fixture_config("qwen3.5-9b")), with_vision=False)
    assert 16.68 < w9.model / 2**30 < 16.73
    assert abs(w9.mtp / 2**30 - 0.46) < 0.01  # '+0.46 GiB with the MTP drafter' (17.26 - 16.8)
    w8 = weights_from_config(arch_from_config(fixture_config("qwen3-8b")), with_vision=False)
    assert abs(w8.model / 2**30 - 15.27) < 0.02


def test_awq_linear_bytes():
    s = QuantScheme("awq", 4, 128, zero_point=True)
    # qweight in*out/2, qzeros (in/128)*(out/8)*4, scales (in/128)*out*2
    assert s.linear_bytes(4096, 12288) == 4096 * 12288 // 2 + 32 * 12288 // 2 + 32 * 12288 * 2


def test_nvfp4_and_fp8_block_bytes():
    assert QuantScheme("nvfp4", 4, 16).linear_bytes(4096, 4096) == 4096 * 4096 // 2 + 4096 * 4096 // 16 + 8
    assert QuantScheme("fp8", 8, fp8_block=(128, 128)).linear_bytes(4096, 4096) == 4096 * 4096 + 32 * 32 * 4


def test_ignore_list_and_always_unquantized():
    s = scheme_from_config({"quant_method": "compressed-tensors", "format": "pack-quantized",
                            "config_groups": {"g": {"weights": {"num_bits": 4, "type": "int", "group_size": 32,
                                                                "strategy": "group", "symmetric": True}}},
                            "ignore": ["lm_head", "re:.*self_attn.*"]})
    a = arch_from_config(fixture_config("qwen3.5-0.8b"))
    by_name = {t.name.split(".", 3)[-1]: s.quantizes(t) for t in model_tensors(a)}
    assert by_name["0.mlp.gate_proj"] and by_name["0.linear_attn.in_proj_qkv"]
    assert not by_name["3.self_attn.q_proj"]  # ignored by regex
    assert not by_name["0.linear_attn.in_proj_b"]  # GDN gates stay bf16
    assert s.group_size == 32 and s.method == "int-pack"


def test_unknown_quantization_is_a_clear_error():
    with pytest.raises(UserError, match="not modelled"):
        scheme_from_config({"quant_method": "bitsandbytes"})


def _write_safetensors(path, tensors):
    header, offset = {}, 0
    for name, (dtype, shape, itemsize) in tensors.items():
        n = itemsize
        for d in shape:
            n *= d
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + n]}
        offset += n
    raw = json.dumps(header).encode()
    with open(path, "wb") as fh:
        fh.write(struct.pack("<Q", len(raw)) + raw + b"\0" * offset)


def test_safetensors_headers_agree_with_config_for_awq(tmp_path):
    """A tiny Qwen3.5-shaped AWQ checkpoint written as real safetensors: sizing it from its
    headers must give the same bytes as sizing it from config + quantization_config."""
    cfg = fixture_config("qwen3.5-0.8b")
    t = cfg["text_config"]
    t.update(hidden_size=256, intermediate_size=512, num_hidden_layers=4, vocab_size=1024,
             layer_types=["linear_attention"] * 3 + ["full_attention"], mtp_num_hidden_layers=0)
    cfg.pop("vision_config")
    cfg["quantization_config"] = {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True}
    a = arch_from_config(cfg, "tiny")
    s = scheme_from_config(cfg["quantization_config"])
    tensors = {}
    for ten in model_tensors(a):
        if s.quantizes(ten):
            i, o = ten.in_f, ten.out_f
            tensors[ten.name + ".qweight"] = ("I32", [i, o // 8], 4)
            tensors[ten.name + ".qzeros"] = ("I32", [i // 128, o // 8], 4)
            tensors[ten.name + ".scales"] = ("F16", [i // 128, o], 2)
        else:
            tensors[ten.name + ".weight"] = ("BF16", [ten.numel], 2)
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    _write_safetensors(tmp_path / "model.safetensors", tensors)
    src = resolve_model(str(tmp_path))
    assert src.origin == "local" and src.tensors
    from vrambudget.model.checkpoint import weights_from_tensors

    exact = weights_from_tensors(src.tensors, src.arch)
    computed = weights_from_config(src.arch, with_vision=False)
    assert exact.source == "safetensors" and exact.model == computed.model


def test_bundled_awq_profile_is_smaller_than_bf16():
    awq = weights_from_config(resolve_model("qwen3.5-9b-awq").arch, with_vision=False).model
    bf16 = weights_from_config(resolve_model("qwen3.5-9b").arch, with_vision=False).model
    assert 9.9 < awq / 2**30 < 10.1 and bf16 / 2**30 > 16.6  # only the MLP (4.83B params) is 4-bit


def test_vision_tower_counted_only_without_language_model_only():
    from vrambudget.hardware import catalog as gpus
    from vrambudget.deployment import Flags, resolve
    from vrambudget.vllm_rules import rules_for

    src = resolve_model("qwen3.5-9b")
    lmo = weight_bytes(resolve(src, gpus.lookup("h200"), rules_for("0.20"), Flags()))
    full = weight_bytes(resolve(src, gpus.lookup("h200"), rules_for("0.20"), Flags(language_model_only=False)))
    assert lmo.vision == 0 and 0.7 < full.vision / 2**30 < 0.9  # ~0.46B params of ViT in bf16


@pytest.mark.parametrize("model,published", [
    ("qwen3.5-9b", 9_653_104_368),  # all tensors (LM + MTP + vision), as its checkpoints list them
    ("llama-3.1-8b", 8_030_261_248),
    ("qwen3-8b", 8_190_735_360),
])
def test_parameter_counts_match_published_totals(model, published):
    from vrambudget.model.weights import mtp_tensors

    a = resolve_model(model).arch
    total = sum(t.numel for t in model_tensors(a)) + sum(t.numel for t in (a.vision.tensors() if a.vision else ()))
    total += sum(t.numel for t in mtp_tensors(a)) if a.mtp_layers else 0
    assert total == published


def test_hub_id_offline_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    with pytest.raises(UserError, match="qwen3.5-9b-awq"):
        resolve_model("some-org/some-model-that-is-not-cached")


def test_awq_zero_points_widen_on_hopper():
    """Machete (Hopper) keeps AWQ zero points as bf16: 2 bytes per (group, output) instead of 4 bits. For the
    9B AWQ layout's MLPs (32 layers: gate_up 4096 -> 2 x 12288, down 12288 -> 4096, groups of 128) that is
    32 x (32 x 24576 + 96 x 4096) x 1.5 bytes more on an H100 than on a 4060 Ti (Marlin)."""
    from vrambudget.hardware import catalog as gpus
    from vrambudget.budget import weight_bytes
    from vrambudget.deployment import Flags, resolve
    from vrambudget.vllm_rules import rules_for

    src = resolve_model("qwen3.5-9b-awq")
    h100 = weight_bytes(resolve(src, gpus.lookup("h100"), rules_for("0.26"), Flags()))
    ada = weight_bytes(resolve(src, gpus.lookup("4060ti"), rules_for("0.26"), Flags()))
    assert h100.model - ada.model == 32 * (32 * 24576 + 96 * 4096) * 3 // 2


def test_autoround_config_is_gptq_packed_with_its_16_bit_layers_kept():
    """AutoRound INT4 (the checkpoints club-3090 serves most): GPTQ packing; extra_config layers at 16 bits stay bf16."""
    s = scheme_from_config({"quant_method": "auto-round", "bits": 4, "group_size": 128, "sym": True,
                            "extra_config": {"model.layers.0.mlp.down_proj": {"bits": 16}, "lm_head": {"bits": 4}}})
    assert s.method == "gptq" and s.bits == 4 and s.group_size == 128
    assert "model.layers.0.mlp.down_proj" in s.ignore and "lm_head" not in s.ignore


def _layout_bytes(name: str) -> int:
    """The whole checkpoint (model, MTP layer, vision tower) of a bundled quantized layout, as stored: without the
    g_idx vLLM allocates at load for GPTQ layers (an AutoRound export stores none)."""
    from dataclasses import replace

    from vrambudget.model.weights import Int4Load, mtp_tensors, tensor_bytes

    a = resolve_model(name).arch
    s = replace(scheme_from_config(a.quantization), load=Int4Load(g_idx_kept=False))
    return sum(tensor_bytes(t, s, 2) for t in [*model_tensors(a), *mtp_tensors(a), *(a.vision.tensors() if a.vision else ())])


def test_autoround_layout_gives_the_logged_checkpoint_size():
    """vLLM logged 'Checkpoint size: 17.69 GiB' for Lorbus/Qwen3.6-27B-int4-AutoRound (club-3090 issue 142): the
    bundled layout (MTP layer in int4, mtp.fc, in_proj_a/b and the tower in bf16) gives 17.6918 GiB; an MTP layer
    in bf16 would print 18.21, a stored g_idx 17.70."""
    assert round(_layout_bytes("qwen3.6-27b-int4-autoround") / 2**30, 2) == 17.69
    assert _layout_bytes("qwen3.8-27b-int4-autoround") == _layout_bytes("qwen3.6-27b-int4-autoround")


def test_fp8_layout_gives_the_checkpoints_bytes():
    """club-3090 measured the 66 safetensors files of Qwen/Qwen3.8-27B-FP8 (and of Qwen3.6-27B-FP8) at
    30,866,866,928 bytes: the bundled layout (MTP layer in fp8) is within 0.01 % of it."""
    assert abs(_layout_bytes("qwen3.8-27b-fp8") - 30_866_866_928) < 30_866_866_928 * 1e-4


def test_autoround_blocks_and_regex_extra_config():
    """block_name_to_quantize limits what is quantized; an extra_config key with regex characters is a pattern."""
    from vrambudget.model.weights import Tensor

    s = scheme_from_config({"quant_method": "auto-round", "bits": 4, "group_size": 128, "sym": True,
                            "block_name_to_quantize": "model.language_model.layers,mtp.layers",
                            "extra_config": {r".*mlp\.down_proj.*": {"bits": 16}}})
    assert s.quantizes(Tensor("mtp.layers.0.mlp.up_proj", 64, 64))
    assert not s.quantizes(Tensor("mtp.fc", 128, 64))  # outside the named blocks
    assert not s.quantizes(Tensor("model.language_model.layers.3.mlp.down_proj", 64, 64))
    assert s.quantizes(Tensor("model.language_model.layers.3.mlp.up_proj", 64, 64)) and s.symmetric


def test_marlin_frees_a_symmetric_checkpoints_zero_points():
    """A symmetric GPTQ / AutoRound layer: Machete keeps the unused qzeros and g_idx, Marlin frees them (vLLM 0.26
    source; lab-vllm-0.26.0-h100/quant: 17.24 vs 17.14 GiB on the same layout, 0.10 apart)."""
    from vrambudget.hardware.facts import int4_load

    a = resolve_model("qwen3.6-27b-int4-autoround").arch
    machete = weights_from_config(a, with_vision=False, int4=int4_load(gpus.lookup("h100")))
    marlin = weights_from_config(a, with_vision=False, int4=int4_load(gpus.lookup("rtx3090")))
    assert round((machete.model + machete.mtp - marlin.model - marlin.mtp) / 2**30, 2) == 0.10


def test_version_load_extra_only_where_measured():
    """vLLM 0.26's 1.5 B per group was measured on AWQ and AutoRound (GPTQ) layers: a compressed-tensors W4A16
    layer, never measured, is sized as stored."""
    from dataclasses import replace

    from vrambudget.model.weights import Int4Load

    extra = Int4Load(extra_bytes_per_group=1.5)
    ct = scheme_from_config({"quant_method": "compressed-tensors", "format": "pack-quantized", "config_groups": {
        "g": {"targets": ["Linear"], "weights": {"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128}}}})
    assert replace(ct, load=extra).linear_bytes(4096, 4096) == ct.linear_bytes(4096, 4096)
    awq = QuantScheme("awq", 4, 128, zero_point=True)
    assert replace(awq, load=extra).linear_bytes(4096, 4096) - awq.linear_bytes(4096, 4096) == 32 * 4096 * 3 // 2


def test_ignore_entries_match_as_vllm_does():
    from vrambudget.model.weights import ignored

    # FP8's exact module names: MiniMax-M2's 'gate' is its router, never a part of the experts' gate_proj
    assert ignored("model.layers.0.mlp.gate.", "gate") and not ignored("model.layers.0.mlp.experts.gate_proj", "gate")
    # ModelOpt's globs, 'X*' also X itself
    assert ignored("model.layers.3.self_attn.q_proj", "model.layers.3.self_attn*")
    assert ignored("model.layers.3.self_attn", "model.layers.3.self_attn*")
    assert not ignored("model.layers.30.self_attn.q_proj", "model.layers.3.self_attn*")
    # dotted entries: the module path or a part of it; compressed-tensors' regular expressions
    assert ignored("model.layers.0.linear_attn.in_proj_b", "linear_attn.in_proj_b")
    assert ignored("lm_head", "re:^lm_head$") and not ignored("model.norm", "")


def test_minimax_m25_fp8_weights_as_the_lab_loaded_them():
    from pathlib import Path

    from vrambudget.comparison import compare_file

    fx = Path(__file__).resolve().parent / "fixtures"
    c = compare_file(fx / "lab-vllm-0.33.0-h100" / "families" / "mm-fp8-e.log",
                     model=str(fx / "models" / "lab-minimax-m2.5-4l-fp8"))
    rows = {r[0]: r for r in c.rows}
    assert rows["weights (incl. drafter)"][1] == 16.00 and abs(rows["weights (incl. drafter)"][3]) <= 0.01
    assert abs(rows["available KV cache"][3]) <= 0.05
