"""Every architecture vLLM serves that the tool plans is a family (vrambudget/families), each layer a kind
(vrambudget/layers) (issue 35): the lab's vLLM 0.26.0 startups of each family on the H100 (tests/fixtures/lab-vllm-
0.26.0-h100/families and defaults; configs in tests/fixtures/models, cut ones in tests/fixtures/models/lab-*), and
configs no family claims refused in one line."""

import json
import re
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from vrambudget.cli import app
from vrambudget.errors import UserError
from vrambudget.comparison import compare_file
from vrambudget.kv.planner import plan_kv
from vrambudget.families import arch_from_config
from vrambudget.prediction import layout_for
from vrambudget.units import GiB

ROOT = Path(__file__).resolve().parent.parent
LAB = ROOT / "tests" / "fixtures" / "lab-vllm-0.26.0-h100"
MODELS = ROOT / "tests" / "fixtures" / "models"
runner = CliRunner()

# (log, the family, its model folder, the available-KV bound in GiB): each startup against its own prediction
FAMILY_LOGS = [
    ("families/dsv2l-e.log", "DeepSeek V2 (MLA, Model Runner V2)", "deepseek-v2-lite", 0.15),
    ("families/dsv2l-g.log", "DeepSeek V2 (MLA), CUDA graphs", "deepseek-v2-lite", 0.15),
    ("families/gptoss20-e.log", "gpt-oss (sinks, sliding 128, MXFP4)", "gpt-oss-20b", 0.15),
    ("families/nano-e.log", "Nemotron-3 Nano (Mamba2 + MoE)", "nemotron-3-nano-30b-a3b", 0.15),
    ("families/nh56-e.log", "Nemotron-H (Mamba2, dense)", "lab-nemotron-h-56b-24l", 0.15),
    ("families/llama4-e.log", "Llama 4 (chunked local attention)", "lab-llama-4-scout-4l", 0.15),
    ("families/mixtral-e.log", "Mixtral", "lab-mixtral-8x7b-16l", 0.15),
    ("families/phi4-e.log", "Phi-4 (Model Runner V2)", "phi-4", 0.15),
    ("families/minimax-e.log", "MiniMax-M2.5", "lab-minimax-m2.5-4l", 0.15),
    ("families/glm47-e.log", "GLM-4.7 (glm4_moe)", "lab-glm-4.7-5l", 0.15),
    ("defaults/l8-e-h100.log", "Llama 3.1 (Model Runner V2)", None, 0.15),
    ("defaults/q8-g-h100.log", "Qwen3 (Model Runner V2, graphs outside the budget)", None, 0.15),
    ("defaults/q30-g-h100.log", "Qwen3-MoE (V1, 1024 seqs)", None, 0.15),
    ("defaults/q27-g-h100.log", "Qwen3.5 (GatedDeltaNet hybrid)", None, 0.15),
    ("q36-35b-e-fp8.log", "Qwen3.6-35B-A3B (GDN hybrid MoE)", None, 0.15),
    ("g26t-e-bf16.log", "Gemma 4", None, 0.15),
    # measured on itself: the MLA prefill coefficient is the mean of this log's and DeepSeek-V2-Lite's
    ("families/dsv3-e.log", "DeepSeek V3 (MLA, Model Runner V1)", "lab-deepseek-v3-5l", 0.15),
    # Gemma 3 loads 0.15 GiB more than its tensors and peaks 0.11 higher at 8192 tokens: not modelled (said here)
    ("families/gemma3-e.log", "Gemma 3", "lab-gemma-3-27b-text", 0.30),
]


def _compare(log: str, model: str | None):
    return compare_file(LAB / log, model=str(MODELS / model) if model else None)


@pytest.mark.parametrize("log,family,model,bound", FAMILY_LOGS, ids=[x[0] for x in FAMILY_LOGS])
def test_each_family_within_its_bound_of_its_own_startup(log, family, model, bound):
    cmp = _compare(log, model)
    rows = {r[0]: r for r in cmp.rows}
    assert abs(rows["available KV cache"][3]) <= bound, (family, rows["available KV cache"])
    logged_w, pred_w = rows["weights (incl. drafter)"][1], rows["weights (incl. drafter)"][2]
    assert abs(pred_w - logged_w) / logged_w <= 0.011, (family, logged_w, pred_w)  # 'Model loading took', within 1%


@pytest.mark.parametrize("log,family,model,bound", FAMILY_LOGS, ids=[x[0] for x in FAMILY_LOGS])
def test_each_family_reproduces_vllms_kv_plan_from_its_logged_memory(log, family, model, bound):
    cmp = _compare(log, model)
    f, d = cmp.facts, cmp.prediction.deployment
    lay = layout_for(d)
    if f.block_size:
        assert lay.block_size == f.block_size
    tokens = {plan_kv(lay, int((f.available_kv_gib + dx) * GiB), f.max_model_len, d.rules).kv_cache_tokens
              for dx in (-0.005, 0, 0.005)}
    assert min(tokens) <= f.kv_cache_tokens <= max(tokens), (family, f.kv_cache_tokens, tokens)


def test_at_least_fifteen_families_within_0_15_gib():
    assert len({x[1].split(" (")[0] for x in FAMILY_LOGS if x[3] <= 0.15}) >= 15


def test_the_mamba2_hybrid_refusal_is_predicted():
    """Nemotron-3 Nano with vLLM's 1024 seqs and CUDA graphs: vLLM found 888 Mamba cache blocks and refused."""
    text = (LAB / "families" / "nano-g.log").read_text()
    seqs, blocks = map(int, re.search(r"max_num_seqs \((\d+)\) exceeds available Mamba cache blocks \((\d+)\)",
                                      text).groups())
    cmp = _compare("families/nano-g.log", "nemotron-3-nano-30b-a3b")
    chk = next(c for c in cmp.prediction.checks if c.check == "mamba_cache_blocks")
    assert not chk.passes and chk.value == seqs == 1024 and abs(chk.limit - blocks) <= 20


def test_block_tables_that_do_not_fit_beside_the_kv_cache_are_a_no():
    """Llama 4 Scout (cut to 4 layers) at vLLM's default max_model_len, 10,485,760 tokens: its 4 KV groups' block
    tables (1024 seqs x 655,360 blocks of 16 tokens x 4 B each, 10 GiB) are allocated after the profile, and vLLM
    ran out of memory allocating the KV cache (46.55 GiB asked, 44.99 free). predict says it does not start, short
    by about what vLLM lacked, and names the longest max_model_len whose tables fit."""
    text = (LAB / "families" / "llama4-e.log").read_text()
    asked, free = map(float, re.search(r"Tried to allocate ([0-9.]+) GiB\. GPU 0 has a total capacity of "
                                       r"[0-9.]+ GiB of which ([0-9.]+) GiB is free", text).groups())
    cmp = _compare("families/llama4-e.log", "lab-llama-4-scout-4l")
    assert cmp.facts.outcome == "oom_kv_allocation"
    p = cmp.prediction
    assert not p.starts and any("block tables" in r for r in p.reasons)
    said = next(r for r in p.reasons if "block tables" in r)
    take, room = map(float, re.search(r"take ([0-9.]+) GiB beside the KV cache, where ([0-9.]+) GiB", said).groups())
    assert take == 10.00 and abs((take - room) - (asked - free)) <= 0.15
    assert 0 < p.ceiling < p.deployment.max_model_len and f"--max-model-len {p.ceiling}" in said


def test_mla_plans_one_latent_per_token_on_every_rank():
    cfg = json.loads((MODELS / "deepseek-v3" / "config.json").read_text())
    a = arch_from_config(cfg, "ds")
    assert a.uses_mla and len(a.layers) == 61
    out = {}
    for kv, tp in (("auto", 1), ("auto", 8), ("fp8", 1)):
        r = runner.invoke(app, ["predict", "-m", str(MODELS / "deepseek-v3"), "--gpu", "h200", "--kv-cache-dtype", kv,
                                "-tp", str(tp), "--json", "--max-model-len", "4096"])
        out[(kv, tp)] = json.loads(r.output)
    # (512 + 64) x 2 bytes a token and layer in bf16, on every rank whatever the TP; FLASH_ATTN_MLA's 16-token block
    assert out[("auto", 1)]["bytes_per_block"] == out[("auto", 8)]["bytes_per_block"] == 61 * 16 * 1152
    # fp8: FLASHMLA, 64-token blocks of 576 bytes a token
    assert out[("fp8", 1)]["block_size"] == 64 and out[("fp8", 1)]["bytes_per_block"] == 61 * 64 * 576


def test_the_lab_configs_are_what_the_plan_wrote():
    sys.path.insert(0, str(ROOT / "benchmarks" / "lab"))
    import run

    plan = json.loads((ROOT / "benchmarks" / "lab" / "plans" / "h100-0.26.0-defaults-families.json").read_text())
    for dest, m in plan["models"].items():
        if "fixture" in m:
            folder = MODELS / f"lab-{Path(dest).name}"
            assert json.loads((folder / "config.json").read_text()) == run._model_config(m), dest


UNKNOWN = [  # architectures and layer patterns no family claims: each refused in one line naming what is missing
    ({"architectures": ["MambaForCausalLM"], "model_type": "mamba"}, "MambaForCausalLM"),
    ({"architectures": ["Mamba2ForCausalLM"], "model_type": "mamba2"}, "Mamba2ForCausalLM"),
    ({"architectures": ["JambaForCausalLM"], "model_type": "jamba"}, "JambaForCausalLM"),
    ({"architectures": ["FalconH1ForCausalLM"], "model_type": "falcon_h1"}, "FalconH1ForCausalLM"),
    ({"architectures": ["GraniteMoeHybridForCausalLM"], "model_type": "granitemoehybrid"}, "GraniteMoeHybrid"),
    ({"architectures": ["MiMoV2FlashForCausalLM"], "model_type": "mimo_v2_flash"}, "hybrid_layer_pattern"),
    ({"architectures": ["Qwen2VLForConditionalGeneration"], "model_type": "qwen2_vl"}, "Qwen2VLForConditional"),
    ({"architectures": ["BertModel"], "model_type": "bert"}, "BertModel"),
    ({"architectures": ["DeepseekV32ForCausalLM"], "model_type": "deepseek_v32", "kv_lora_rank": 512,
      "index_topk": 2048, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128}, "index_n_heads"),
    ({"architectures": ["NemotronHForCausalLM"], "model_type": "nemotron_h", "hybrid_override_pattern": "M*X-"},
     "hybrid_override_pattern"),
    ({"architectures": ["NemotronHForCausalLM"], "model_type": "nemotron_h", "hybrid_override_pattern": "M*-E",
      "moe_latent_size": 1024, "n_routed_experts": 8}, "latent MoE"),
    ({"architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text", "use_bidirectional_attention": True},
     "bidirectional"),
]
BASE = {"num_hidden_layers": 4, "hidden_size": 1024, "num_attention_heads": 8, "num_key_value_heads": 2,
        "intermediate_size": 2048, "vocab_size": 32000, "max_position_embeddings": 8192, "torch_dtype": "bfloat16",
        "mamba_num_heads": 16, "mamba_head_dim": 64, "n_groups": 1, "ssm_state_size": 64, "conv_kernel": 4}


@pytest.mark.parametrize("cfg,said", UNKNOWN, ids=[x[1] for x in UNKNOWN])
def test_an_unknown_architecture_or_pattern_is_refused_in_one_line(tmp_path, cfg, said):
    with pytest.raises(UserError, match=re.escape(said)):
        arch_from_config({**BASE, **cfg}, "m")
    (tmp_path / "config.json").write_text(json.dumps({**BASE, **cfg}))
    r = runner.invoke(app, ["predict", "-m", str(tmp_path), "--gpu", "h100"])
    lines = [x for x in r.output.splitlines() if x.strip()]
    assert r.exit_code == 2 and len(lines) == 1 and said in lines[0], r.output
    assert len(UNKNOWN) >= 10


def test_models_lists_the_families_with_their_evidence():
    r = runner.invoke(app, ["models", "--families", "--json"])
    fams = json.loads(r.output)["families"]
    names = [f["name"] for f in fams]
    assert any("MLA" in n for n in names) and any("Mamba2" in n for n in names) and any("gpt-oss" in n for n in names)
    assert all(f["evidence"] and f["architectures"] for f in fams)


def test_qwen3_vl_plans_its_text_model_and_its_tower(capsys):
    """The text model with --language-model-only (the default where the tower is planned); with the tower its weights
    (three deepstack mergers), the deepstack buffers and its encoder peak traced in vLLM 0.33.0's source: Qwen3-VL-8B
    at 8,192 and 32,768 batched tokens (the language model's peak + the held embeddings decides, then the tower's);
    on a version where the trace was not checked the tower is refused in one line."""
    from .cli_run import run

    fx = Path(__file__).resolve().parent / "fixtures"
    m = str(fx / "models" / "qwen3-vl-8b-instruct")
    for flags in ([], ["--language-model-only"]):
        code, out, _ = run(["predict", "--model", m, "--gpu", "h100", *flags, "--json"], capsys)
        assert code == 0 and json.loads(out)["inputs"]["language_model_only"] is True
    code, out, _ = run(["predict", "--model", m, "--gpu", "h100", "--with-vision", "--json"], capsys)
    assert code == 0 and json.loads(out)["inputs"]["language_model_only"] is False
    code, _, err = run(["predict", "--model", m, "--gpu", "h100", "--with-vision", "--vllm-version", "0.26.0"], capsys)
    assert code == 2 and err.count("\n") == 1 and "Qwen3-VL ViT" in err and "--language-model-only" in err
    for log, activation in (("lab-vllm-0.33.0-h100/vision/q3vl-8b-vis.log", 2.61),
                            ("lab-vllm-0.33.0-h200/vision/q3vl-8b-t32k.log", 4.33)):
        rows = {r[0]: r for r in compare_file(fx / log, model=m).rows}
        assert rows["activation peak"][1] == activation and abs(rows["activation peak"][3]) <= 0.02
        # the graph estimate's band top (+0.10) less the tower's load holes, now counted (0.02)
        assert abs(rows["available KV cache"][3]) <= 0.07, rows["available KV cache"]


def test_qwen2_5_vl_plans_its_tower_with_and_without_videos():
    """Qwen2.5-VL-7B with its tower, profiled with a 14-frame video (458,752 patches): 14.88 GiB of peak (its MLP's
    tensors, the uint8 pixels and the rope caches, traced in vLLM 0.33.0's source); with --limit-mm-per-prompt
    '{"video":0}' vLLM profiles an image instead (2.20 GiB: the language model's peak decides). Both within 0.15 of
    available KV (its kept memory is 0.09-0.10 GiB above the plan on both, not traced)."""
    fx = Path(__file__).resolve().parent / "fixtures"
    m = str(fx / "models" / "qwen2.5-vl-7b-instruct")
    a = arch_from_config(json.loads(Path(m, "config.json").read_text()), "q25")
    assert abs(sum(t.numel for t in a.vision.tensors()) * 2 / GiB - (15.67 - 14.40)) <= 0.02  # with - without
    rows = {r[0]: r for r in compare_file(fx / "lab-vllm-0.33.0-h100/vision/q25vl-7b-vis.log", model=m).rows}
    assert abs(rows["activation peak"][3]) <= 0.02 and abs(rows["available KV cache"][3]) <= 0.15
    rows = {r[0]: r for r in compare_file(fx / "lab-vllm-0.33.0-h200/vision/q25vl-7b-img.log", model=m).rows}
    assert rows["activation peak"][1] == 2.20 and abs(rows["activation peak"][3]) <= 0.02
    assert abs(rows["available KV cache"][3]) <= 0.15


@pytest.mark.parametrize("model, limits, said", [
    ("qwen2.5-vl-7b-instruct", "video=0", "give a JSON object"),
    ("qwen2.5-vl-7b-instruct", '{"video": -1}', "a number of items, 0 or more"),
    ("qwen3.5-9b", '{"image": 0}', "its profile with the other items is not modelled"),
    # vLLM's per-modality options size the dummy item (Gemma 4's frames, Qwen2.5-VL's): not modelled
    ("gemma-4-26b-a4b", '{"video": {"count": 1, "num_frames": 8}}', "sets num_frames"),
])
def test_limit_mm_per_prompt_refusals_are_one_line(capsys, model, limits, said):
    from .cli_run import run

    m = str(Path(__file__).resolve().parent / "fixtures" / "models" / model)
    code, _, err = run(["predict", "--model", m, "--gpu", "h200", "--with-vision", "--limit-mm-per-prompt", limits],
                       capsys)
    assert code == 2 and err.count("\n") == 1 and said in err, err


def test_limit_mm_per_prompt_reaches_the_plan_and_the_command(capsys):
    """Every modality of a tower at 0 is --language-model-only (vLLM skips the tower); videos off keeps Qwen2.5-VL's
    tower with an image profile, and serve-cmd passes the limit on."""
    from .cli_run import run

    fx = Path(__file__).resolve().parent / "fixtures" / "models"
    code, out, _ = run(["predict", "--model", str(fx / "gemma-3-4b-it"), "--gpu", "h200", "--with-vision",
                        "--limit-mm-per-prompt", '{"image": 0}', "--json"], capsys)
    assert code == 0 and json.loads(out)["inputs"]["language_model_only"] is True
    args = ["--model", str(fx / "qwen2.5-vl-7b-instruct"), "--gpu", "h200", "--with-vision"]
    code, out, _ = run(["predict", *args, "--limit-mm-per-prompt", '{"video": 0}', "--json"], capsys)
    with_image = json.loads(out)
    code2, out2, _ = run(["predict", *args, "--json"], capsys)
    assert code == code2 == 0 and with_image["inputs"]["limit_mm_per_prompt"] == {"video": 0}
    assert json.loads(out2)["activation_bytes"] > 6 * with_image["activation_bytes"]  # the video's 14.8 GiB, not 2.2
    code, out, _ = run(["serve-cmd", *args, "--limit-mm-per-prompt", '{"video": 0}'], capsys)
    assert code == 0 and """--limit-mm-per-prompt '{"video":0}'""" in out


@pytest.mark.parametrize("log, model, bound", [("q3vl-8b-lmo", "qwen3-vl-8b-instruct", 0.05),
                                               ("g3-27b-lmo", "gemma-3-27b-it", 0.05),
                                               ("q25vl-7b-lmo", "qwen2.5-vl-7b-instruct", 0.10)])
def test_the_vl_families_text_models_within_their_bound_of_a_real_startup(log, model, bound):
    # vLLM 0.33.0 on an H200 with --language-model-only at serve's defaults (plan h200x4-0.33.0-issue46b)
    from vrambudget.comparison import compare_file

    fx = Path(__file__).resolve().parent / "fixtures"
    c = compare_file(fx / "lab-vllm-0.33.0-h200" / "vision" / f"{log}.log", model=str(fx / "models" / model))
    rows = {r[0]: r for r in c.rows}
    assert abs(rows["available KV cache"][3]) <= bound, rows["available KV cache"]


def test_a_piecewise_graphs_memory_grows_with_the_layers():
    # Gemma 3 27B (62 layers) on vLLM 0.33.0: 1.42 GiB of V2 graph estimate logged, where a constant per PIECEWISE
    # graph (fitted on 32-36-layer models) gave 1.05; per graph and layer: 1.46
    from vrambudget.comparison import compare_file

    fx = Path(__file__).resolve().parent / "fixtures"
    c = compare_file(fx / "lab-vllm-0.33.0-h200" / "vision" / "g3-27b-lmo.log", model=str(fx / "models" / "gemma-3-27b-it"))
    rows = {r[0]: r for r in c.rows}
    assert rows["CUDA graph estimate"][1] == 1.42 and abs(rows["CUDA graph estimate"][3]) <= 0.05


def test_every_layer_kind_checks_its_own_tensor_parallel_split(capsys):
    # Nemotron-H 56B: 256 Mamba2 heads in 8 groups; TP 16 splits the attention heads but not the groups, which vLLM
    # refuses (mamba_mixer2.py): the Mamba2 kind says so now that resolve asks every layer kind
    from .cli_run import run

    m = str(Path(__file__).resolve().parent / "fixtures" / "models" / "nemotron-h-56b-base-8k")
    code, _, err = run(["predict", "--model", m, "--gpu", "h100", "-tp", "16"], capsys)
    assert code == 2 and "Mamba2 heads" in err and err.count("\n") == 1
    code, _, _ = run(["predict", "--model", m, "--gpu", "h100", "-tp", "8", "--json"], capsys)
    assert code in (0, 1)


def test_a_per_layer_mlp_width_list_keeps_the_mlps_width():
    from vrambudget.families import arch_from_config

    from .conftest import fixture_config

    cfg = fixture_config("nemotron-h-56b-base-8k")
    n_mlp = cfg["hybrid_override_pattern"].count("-")
    a = arch_from_config({**cfg, "intermediate_size": [cfg["intermediate_size"]] * n_mlp}, "list")
    assert a.mlp_width == cfg["intermediate_size"] == arch_from_config(cfg, "int").mlp_width


def test_a_tower_that_crowds_out_the_kv_cache_names_what_lowers_it(capsys):
    """Qwen2.5-VL-7B with its tower on a 24 GB card: the 14-frame video profile leaves no KV cache; the answer says
    the tower's share and the flags that lower it, and with videos off the same card holds a long context."""
    from .cli_run import run

    args = ["predict", "--model", str(MODELS / "qwen2.5-vl-7b-instruct"), "--gpu", "4090", "--with-vision"]
    code, out, _ = run(args, capsys)
    assert code == 1 and """--limit-mm-per-prompt '{"video": 0}' profiles another item instead""" in out
    assert "--language-model-only drops the tower" in out
    code, out, _ = run([*args, "--limit-mm-per-prompt", '{"video": 0}', "--json"], capsys)
    assert json.loads(out)["max_model_len_ceiling_restart"] > 50_000


def test_qwen3_vl_with_images_off_is_profiled_with_its_dummy_video():
    """vLLM 0.33.0's dummy video for Qwen3-VL: two frames of half the video processor's 25,165,824 pixels, one
    temporal patch: 12,288 tokens and 49,152 patches a video (qwen3_vl.py _get_dummy_videos); one video at 8,192
    batched tokens, two at 32,768; its outputs carry the deepstack features as an image's."""
    fx = Path(__file__).resolve().parent / "fixtures" / "models" / "qwen3-vl-8b-instruct"
    a = arch_from_config(json.loads((fx / "config.json").read_text()), "q3vl")
    off = frozenset({"image"})
    assert a.vision.profiles_without(off) and not a.vision.profiles_without(frozenset({"image", "video"}))
    p = a.vision.profile(8192, 262144, off)
    assert (p.items, p.tokens_per_item, p.patches) == (1, 12288, 49152)
    p = a.vision.profile(32768, 262144, off)
    assert (p.items, p.patches) == (2, 98304)
    assert a.vision.held_bytes(p, 4096) == 2 * 12288 * 4 * 4096 * 2
    assert a.vision.profile(8192, 262144).tokens_per_item == 16384  # the image where images are on


@pytest.mark.parametrize("model, kwargs, items, tokens, patches", [
    # Qwen2.5-VL: max_pixels 1,003,520 = 1,280 merged patches an image; the 14-frame video wins: 8,960 tokens
    ("qwen2.5-vl-7b-instruct", {"max_pixels": 1003520}, 1, 8960, 35840),
    # size's longest_edge is max_pixels where max_pixels is not given; min_pixels, fps, num_frames change nothing
    ("qwen2.5-vl-7b-instruct", {"size": {"longest_edge": 1003520}, "min_pixels": 3136, "fps": 2}, 1, 8960, 35840),
    # Qwen3-VL: the image's 1,003,520 // 32^2 = 980 tokens; 8 of them fit 8,192 batched tokens
    ("qwen3-vl-8b-instruct", {"max_pixels": 1003520}, 8, 980, 8 * 3920),
    # Gemma 3 with pan and scan: 4 crops beside the image, (4 + 1) x 256 tokens, 6 images at 8,192
    ("gemma-3-4b-it", {"do_pan_and_scan": True}, 6, 1280, 6 * 5 * 4096),
    ("gemma-3-4b-it", {"do_pan_and_scan": True, "pan_and_scan_max_num_crops": 1}, 32, 256, 32 * 4096),
])
def test_mm_processor_kwargs_size_the_profiled_items(model, kwargs, items, tokens, patches):
    """vLLM 0.33's dummy items under --mm-processor-kwargs (/work/notes/mm-kwargs.md's source reading: qwen2_vl.py
    _get_vision_size, qwen3_vl.py, gemma3_mm.py get_num_crops; transformers 5.17 gave Gemma 3 pixel_values
    (5, 3, 896, 896))."""
    fx = Path(__file__).resolve().parent / "fixtures" / "models" / model
    t = arch_from_config(json.loads((fx / "config.json").read_text()), model).vision.with_processor_kwargs(kwargs)
    p = t.profile(8192, 128000)
    assert (p.items, p.tokens_per_item, p.patches) == (items, tokens, patches)


def test_mm_processor_kwargs_reach_the_command_and_bad_ones_are_one_line(capsys):
    from .cli_run import run

    fx = Path(__file__).resolve().parent / "fixtures" / "models"
    args = ["--model", str(fx / "qwen2.5-vl-7b-instruct"), "--gpu", "h100", "--with-vision"]
    code, out, _ = run(["predict", *args, "--mm-processor-kwargs", '{"max_pixels": 1003520}', "--json"], capsys)
    small = json.loads(out)
    code2, out2, _ = run(["predict", *args, "--json"], capsys)
    assert code == code2 == 0 and small["inputs"]["mm_processor_kwargs"] == {"max_pixels": 1003520}
    assert json.loads(out2)["activation_bytes"] > 6 * small["activation_bytes"]  # the 14.9 GiB video, not 2.2
    code, out, _ = run(["serve-cmd", *args, "--mm-processor-kwargs", '{"max_pixels": 1003520}'], capsys)
    assert code == 0 and """--mm-processor-kwargs '{"max_pixels":1003520}'""" in out
    for model, kwargs, said in (("gemma-3-4b-it", '{"foo": 1}', "foo not modelled for the SigLIP tower"),
                                ("lab-llama-4-scout-4l-vis", '{"max_pixels": 1003520}', "not modelled"),
                                ("qwen2.5-vl-7b-instruct", "[1]", "give a JSON object"),
                                ("qwen2.5-vl-7b-instruct", '{"max_pixels": 10}', "at least 784"),
                                ("qwen3-8b", '{"max_pixels": 1003520}', "no vision tower")):
        code, _, err = run(["predict", "--model", str(fx / model), "--gpu", "h100", "--with-vision",
                            "--mm-processor-kwargs", kwargs], capsys)
        assert code == 2 and err.count("\n") == 1 and said in err, err


def test_a_log_s_mm_processor_kwargs_are_read_with_it():
    from vrambudget.logparse import flags_from_args, unmodelled_args

    args = {"mm_processor_kwargs": {"max_pixels": 1003520}, "language_model_only": False}
    assert flags_from_args(args)["mm_processor_kwargs"] == '{"max_pixels":1003520}'
    assert unmodelled_args(args) == []  # planned with them now, no longer named as unmodelled
