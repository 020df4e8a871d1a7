"""Write the processor and tokenizer files a vision-language dummy-weight startup needs for vLLM's multimodal
profiling (the vision encoder's peak), without the real tokenizer: the host reaches no hub. The tokenizer is a
word-level stand-in that knows only the special tokens, at the ids the model's config.json names (where the config
names none, at stand-in ids: only the ids the config names reach the model). Profiling feeds token ids and a dummy
image or video, so only those ids and the image/video processor settings matter; each family's processor settings
are its public ones where they change the number of image tokens (said per family below).
  python3 fake_processor.py MODEL_DIR OUT_DIR

Families (config.json's model_type):
  qwen3_5, qwen3_5_moe   Qwen3.5: Qwen2VLImageProcessorFast / Qwen3VLVideoProcessor (patch 16, merge 2, temporal 2,
                         longest edge 16,777,216 px images, 25,165,824 px videos)
  qwen3_vl, qwen3_vl_moe Qwen3-VL: the same processor settings, Qwen2's special-token ids (151643...)
  qwen2_5_vl             Qwen2.5-VL: Qwen2VLImageProcessor, patch 14, min_pixels 3136, max_pixels 12,845,056
  gemma3                 Gemma 3: Gemma3ImageProcessor at vision_config.image_size, image_seq_length =
                         mm_tokens_per_image; pan & scan left at the processor's defaults (off)
  gemma4                 Gemma 4: Gemma4ImageProcessor / Gemma4VideoProcessor at transformers' defaults
                         (patch 16, pooling 3, image soft tokens vision_config.default_output_length)
  mistral3               Mistral Small 3.1 (HF format): PixtralImageProcessor, longest edge vision_config.image_size,
                         patch vision_config.patch_size, spatial_merge_size from the config
  llama4                 Llama 4: Llama4ImageProcessor, tile vision_config.image_size, max_patches 16"""
import json
import shutil
import sys
from pathlib import Path


def _tokenizer_files(out: Path, special: dict, extra: dict, eos: str, pad: str) -> None:
    """A word-level tokenizer that knows the special tokens at their ids, plus filler words at free ids."""
    used = set(special.values())
    free = [i for i in range(0, 2000) if i not in used]
    unk = special.get("<unk>", free[0])
    vocab = {"<unk>": unk, **{f"w{i}": i for i in [j for j in free if j != unk][:999]}, **special}
    tok = {"version": "1.0", "truncation": None, "padding": None,
           "added_tokens": [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
                             "normalized": False, "special": True} for t, i in special.items()],
           "normalizer": None, "pre_tokenizer": {"type": "Whitespace"}, "post_processor": None, "decoder": None,
           "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "<unk>"}}
    (out / "tokenizer.json").write_text(json.dumps(tok))
    (out / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": 262144, "eos_token": eos,
        "pad_token": pad, "unk_token": "<unk>", **extra, "extra_special_tokens": extra}))


def _write(out: Path, name: str, obj: dict) -> None:
    (out / name).write_text(json.dumps(obj, indent=1))


def qwen_vl(cfg: dict, out: Path, family: str) -> None:
    text = cfg.get("text_config", {})
    if family in ("qwen3_5", "qwen3_5_moe"):  # Qwen3.5's own vocabulary (248044 ...)
        base = {"<|endoftext|>": 248044, "<|im_start|>": 248045, "<|im_end|>": 248046, "<|vision_pad|>": 248055}
    else:  # Qwen2 / Qwen3 vocabulary: <|endoftext|> 151643 ... <|vision_pad|> 151654
        base = {"<|endoftext|>": 151643, "<|im_start|>": 151644, "<|im_end|>": 151645, "<|vision_pad|>": 151654}
    vs = cfg.get("vision_start_token_id", text.get("vision_start_token_id", base["<|vision_pad|>"] - 2))
    ve = cfg.get("vision_end_token_id", text.get("vision_end_token_id", base["<|vision_pad|>"] - 1))
    special = {**base, "<|vision_start|>": vs, "<|vision_end|>": ve, "<|image_pad|>": cfg["image_token_id"],
               "<|video_pad|>": cfg["video_token_id"]}
    extra = {"image_token": "<|image_pad|>", "video_token": "<|video_pad|>", "vision_bos_token": "<|vision_start|>",
             "vision_eos_token": "<|vision_end|>"}
    _tokenizer_files(out, special, extra, "<|im_end|>", "<|endoftext|>")
    common = {"temporal_patch_size": 2, "merge_size": 2, "do_rescale": True, "rescale_factor": 1 / 255,
              "do_normalize": True, "do_resize": True, "do_convert_rgb": True}
    if family == "qwen2_5_vl":
        # the public Qwen2.5-VL preprocessor_config.json: one file for images and videos (no video_preprocessor
        # file), patch 14, min_pixels 3136, max_pixels 12845056
        _write(out, "preprocessor_config.json", {
            "image_processor_type": "Qwen2VLImageProcessor", "processor_class": "Qwen2_5_VLProcessor",
            "min_pixels": 3136, "max_pixels": 12845056, "patch_size": 14,
            "image_mean": [0.48145466, 0.4578275, 0.40821073], "image_std": [0.26862954, 0.26130258, 0.27577711],
            **common})
        _write(out, "processor_config.json", {"processor_class": "Qwen2_5_VLProcessor"})
        return
    proc = "Qwen3VLProcessor"
    common = {**common, "patch_size": 16, "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5]}
    _write(out, "preprocessor_config.json", {
        "image_processor_type": "Qwen2VLImageProcessorFast", "processor_class": proc,
        "size": {"shortest_edge": 65536, "longest_edge": 16777216}, **common})
    _write(out, "video_preprocessor_config.json", {
        "video_processor_type": "Qwen3VLVideoProcessor", "processor_class": proc,
        "size": {"shortest_edge": 4096, "longest_edge": 25165824}, "fps": 2, "min_frames": 4, "max_frames": 768,
        "do_sample_frames": True, "return_metadata": False, **common})
    _write(out, "processor_config.json", {"processor_class": proc})


def gemma3(cfg: dict, out: Path) -> None:
    special = {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3, "<start_of_image>": cfg.get("boi_token_index", 255999),
               "<end_of_image>": cfg.get("eoi_token_index", 256000),
               "<image_soft_token>": cfg.get("image_token_index", 262144),
               # vLLM's Gemma 3 processor merges newline runs by their vocabulary ids (gemma3_mm.py
               # _apply_token_matches): stand-in ids, only their presence matters
               "\n": 107, "\n\n": 108, "\n\n\n": 109, "\n\n\n\n": 110}
    extra = {"boi_token": "<start_of_image>", "eoi_token": "<end_of_image>", "image_token": "<image_soft_token>"}
    _tokenizer_files(out, special, extra, "<eos>", "<pad>")
    side = cfg["vision_config"]["image_size"]
    _write(out, "preprocessor_config.json", {
        "image_processor_type": "Gemma3ImageProcessor", "processor_class": "Gemma3Processor",
        "size": {"height": side, "width": side}, "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5],
        "do_resize": True, "do_rescale": True, "rescale_factor": 1 / 255, "do_normalize": True,
        "do_convert_rgb": True})
    _write(out, "processor_config.json", {"processor_class": "Gemma3Processor",
                                          "image_seq_length": cfg.get("mm_tokens_per_image", 256)})


def gemma4(cfg: dict, out: Path) -> None:
    special = {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3, "<|image>": cfg["boi_token_id"], "<image|>": cfg["eoi_token_id"],
               "<|image|>": cfg["image_token_id"], "<|video|>": cfg["video_token_id"],
               "<|audio|>": cfg["audio_token_id"], "<|audio>": cfg["boa_token_id"], "<audio|>": cfg["eoa_token_id"]}
    extra = {"boi_token": "<|image>", "eoi_token": "<image|>", "image_token": "<|image|>",
             "audio_token": "<|audio|>", "boa_token": "<|audio>", "eoa_token": "<audio|>"}
    _tokenizer_files(out, special, extra, "<eos>", "<pad>")
    soft = cfg["vision_config"].get("default_output_length", 280)
    _write(out, "preprocessor_config.json", {"image_processor_type": "Gemma4ImageProcessor",
                                             "processor_class": "Gemma4Processor", "max_soft_tokens": soft})
    _write(out, "video_preprocessor_config.json", {"video_processor_type": "Gemma4VideoProcessor",
                                                   "processor_class": "Gemma4Processor"})
    _write(out, "processor_config.json", {"processor_class": "Gemma4Processor", "image_seq_length": soft})


def mistral3(cfg: dict, out: Path) -> None:
    special = {"<s>": 1, "</s>": 2, "[IMG]": cfg.get("image_token_index", 10), "[IMG_BREAK]": 12,
               "[IMG_END]": 13}
    _tokenizer_files(out, special, {}, "</s>", "<unk>")
    v = cfg["vision_config"]
    _write(out, "preprocessor_config.json", {
        "image_processor_type": "PixtralImageProcessor", "processor_class": "PixtralProcessor",
        "size": {"longest_edge": v["image_size"]}, "patch_size": {"height": v["patch_size"], "width": v["patch_size"]},
        "image_mean": [0.48145466, 0.4578275, 0.40821073], "image_std": [0.26862954, 0.26130258, 0.27577711],
        "do_resize": True, "do_rescale": True, "rescale_factor": 1 / 255, "do_normalize": True,
        "do_convert_rgb": True})
    _write(out, "processor_config.json", {
        "processor_class": "PixtralProcessor", "patch_size": v["patch_size"],
        "spatial_merge_size": cfg.get("spatial_merge_size", 2), "image_token": "[IMG]",
        "image_break_token": "[IMG_BREAK]", "image_end_token": "[IMG_END]"})


def llama4(cfg: dict, out: Path) -> None:
    # only <|patch|> reaches the model (config image_token_index); the other ids are stand-ins
    patch = cfg["image_token_index"]
    special = {"<|begin_of_text|>": 200000, "<|eot|>": 200008, "<|finetune_right_pad|>": 200018,
               "<|image_start|>": 200080, "<|image_end|>": 200081, "<|tile_x_separator|>": 200084,
               "<|tile_y_separator|>": 200085, "<|image|>": 200090, "<|patch|>": patch}
    _tokenizer_files(out, special, {}, "<|eot|>", "<|finetune_right_pad|>")
    side = cfg["vision_config"]["image_size"]
    _write(out, "preprocessor_config.json", {
        "image_processor_type": "Llama4ImageProcessor", "processor_class": "Llama4Processor",
        "size": {"height": side, "width": side}, "max_patches": 16, "resize_to_max_canvas": False,
        "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5], "do_resize": True, "do_rescale": True,
        "rescale_factor": 1 / 255, "do_normalize": True, "do_convert_rgb": True})
    _write(out, "processor_config.json", {"processor_class": "Llama4Processor",
                                          "patch_size": cfg["vision_config"]["patch_size"]})


def main(src: Path, out: Path) -> str:
    out.mkdir(parents=True, exist_ok=True)
    if src.resolve() != out.resolve():
        shutil.copy(src / "config.json", out / "config.json")
    cfg = json.loads((src / "config.json").read_text())
    family = cfg.get("model_type", "")
    if family in ("qwen3_5", "qwen3_5_moe", "qwen3_vl", "qwen3_vl_moe", "qwen2_5_vl"):
        qwen_vl(cfg, out, family)
    elif family == "gemma3":
        gemma3(cfg, out)
    elif family == "gemma4":
        gemma4(cfg, out)
    elif family == "mistral3":
        mistral3(cfg, out)
    elif family == "llama4":
        llama4(cfg, out)
    else:
        raise SystemExit(f"fake_processor: no stand-in processor for model_type {family!r}")
    return family


if __name__ == "__main__":
    fam = main(Path(sys.argv[1]), Path(sys.argv[2]))
    print("LAB fake processor", fam, sys.argv[2])
