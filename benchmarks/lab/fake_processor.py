"""Write the processor files a Qwen3.5 dummy-weight startup needs for vLLM's multimodal profiling (the vision
encoder's peak), without the real tokenizer: the host reaches no hub. The image and video processor settings are
the public Qwen3.5 ones (Qwen2VLImageProcessorFast / Qwen3VLVideoProcessor: patch 16, merge 2, temporal patch 2,
longest edge 16,777,216 pixels); the tokenizer is a word-level stand-in that knows only the special tokens, at the
ids the model's config.json names. Profiling feeds token ids and a dummy image, so only those ids matter.
  python3 fake_processor.py MODEL_DIR OUT_DIR"""
import json
import shutil
import sys
from pathlib import Path

src, out = Path(sys.argv[1]), Path(sys.argv[2])
out.mkdir(parents=True, exist_ok=True)
shutil.copy(src / "config.json", out / "config.json")
cfg = json.loads((src / "config.json").read_text())
special = {"<|endoftext|>": 248044, "<|im_start|>": 248045, "<|im_end|>": 248046,
           "<|vision_start|>": cfg["vision_start_token_id"], "<|vision_end|>": cfg["vision_end_token_id"],
           "<|vision_pad|>": 248055, "<|image_pad|>": cfg["image_token_id"], "<|video_pad|>": cfg["video_token_id"]}
vocab = {"<unk>": 0, **{f"w{i}": i for i in range(1, 1000)}, **special}
tok = {"version": "1.0", "truncation": None, "padding": None,
       "added_tokens": [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
                         "normalized": False, "special": True} for t, i in special.items()],
       "normalizer": None, "pre_tokenizer": {"type": "Whitespace"}, "post_processor": None, "decoder": None,
       "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "<unk>"}}
(out / "tokenizer.json").write_text(json.dumps(tok))
(out / "tokenizer_config.json").write_text(json.dumps({
    "tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": 262144, "eos_token": "<|im_end|>",
    "pad_token": "<|endoftext|>", "unk_token": "<unk>", "image_token": "<|image_pad|>", "video_token": "<|video_pad|>",
    "vision_bos_token": "<|vision_start|>", "vision_eos_token": "<|vision_end|>",
    "extra_special_tokens": {"image_token": "<|image_pad|>", "video_token": "<|video_pad|>",
                             "vision_bos_token": "<|vision_start|>", "vision_eos_token": "<|vision_end|>"}}))
common = {"patch_size": 16, "temporal_patch_size": 2, "merge_size": 2, "image_mean": [0.5, 0.5, 0.5],
          "image_std": [0.5, 0.5, 0.5], "do_rescale": True, "rescale_factor": 1 / 255, "do_normalize": True,
          "do_resize": True, "do_convert_rgb": True}
(out / "preprocessor_config.json").write_text(json.dumps({
    "image_processor_type": "Qwen2VLImageProcessorFast", "processor_class": "Qwen3VLProcessor",
    "size": {"shortest_edge": 65536, "longest_edge": 16777216}, **common}))
(out / "video_preprocessor_config.json").write_text(json.dumps({
    "video_processor_type": "Qwen3VLVideoProcessor", "processor_class": "Qwen3VLProcessor",
    "size": {"shortest_edge": 4096, "longest_edge": 25165824}, "fps": 2, "min_frames": 4, "max_frames": 768,
    "do_sample_frames": True, "return_metadata": False, **common}))
(out / "processor_config.json").write_text(json.dumps({"processor_class": "Qwen3VLProcessor"}))
print("LAB fake processor", out)
