"""The quantization layouts of the bundled quantized Qwen3.6/3.8-27B profiles, written as the config.json
`quantization_config` vLLM reads (the lab startups and profiles/models/*-fp8.json, *-int4-autoround.json).

Neither upload's own quantization_config was in hand; the layouts are reconstructed from what was:
- FP8 (Qwen/Qwen3.6-27B-FP8, Qwen/Qwen3.8-27B-FP8): fp8 e4m3, 128 x 128 weight blocks, dynamic activations
  (club-3090 scripts/lib/profiles/models/qwen3.8-27b.yml, read from the repo's config); not converted: lm_head,
  mtp.fc, the GDN gates in_proj_a/b and the vision tower (names as public copies of Qwen's FP8 lists give them).
  Check: these shapes sum to 30,869,678,304 bytes; the 66 safetensors files total 30,866,866,928 (club-3090,
  measured on both models), 0.01 % apart.
- AutoRound INT4 (Lorbus/Qwen3.6-27B-int4-AutoRound, Frozenlock/Qwen3.8-27B-int4-AutoRound): 4 bits, group 128,
  symmetric, GPTQ packing, the 64 layers and the MTP layer quantized, in_proj_a/b, mtp.fc, embeddings, lm_head
  and vision tower in 16 bits. Check: 17.6918 GiB of shapes; vLLM logged "Checkpoint size: 17.69 GiB" for the
  Lorbus upload (github.com/noonghunna/club-3090/issues/142); the MTP layer in bf16 would give 18.21, mtp.fc
  quantized 17.62, in_proj_a/b quantized 17.66.
  python3 benchmarks/lab/quant_layouts.py CONFIG.json fp8|autoround OUT.json
"""
import json
import sys


def gdn_layers(text: dict) -> list[int]:
    every = int(text.get("full_attention_interval", 4))
    return [i for i in range(int(text["num_hidden_layers"])) if (i + 1) % every]


def fp8(cfg: dict) -> dict:
    text, vision = cfg["text_config"], cfg["vision_config"]
    keep = ["lm_head", "mtp.fc"]
    for i in gdn_layers(text):
        keep += [f"model.language_model.layers.{i}.linear_attn.in_proj_a",
                 f"model.language_model.layers.{i}.linear_attn.in_proj_b"]
    for i in range(int(vision["depth"])):
        keep += [f"model.visual.blocks.{i}.{m}" for m in ("attn.qkv", "attn.proj", "mlp.linear_fc1", "mlp.linear_fc2")]
    keep += ["model.visual.merger.linear_fc1", "model.visual.merger.linear_fc2"]
    return {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic", "weight_block_size": [128, 128],
            "modules_to_not_convert": keep}


def autoround(cfg: dict) -> dict:
    extra = {}
    for i in gdn_layers(cfg["text_config"]):
        for proj in ("in_proj_b", "in_proj_a"):
            extra[f"model.language_model.layers.{i}.linear_attn.{proj}"] = {"bits": 16, "data_type": "fp"}
    extra["mtp.fc"] = {"bits": 16, "data_type": "fp"}
    return {"quant_method": "auto-round", "packing_format": "auto_round:auto_gptq", "bits": 4, "group_size": 128,
            "sym": True, "data_type": "int", "block_name_to_quantize": "model.language_model.layers,mtp.layers",
            "extra_config": extra}


if __name__ == "__main__":
    cfg = json.load(open(sys.argv[1]))
    cfg["quantization_config"] = {"fp8": fp8, "autoround": autoround}[sys.argv[2]](cfg)
    json.dump(cfg, open(sys.argv[3], "w"), indent=1)
