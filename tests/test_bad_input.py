"""The bad-input corpus (issue 24): every flag with wrong types, ranges and combinations; broken, partial and
foreign config.json files; safetensors headers that lie; truncated and foreign logs; corrupt probe records and
profiles; a read-only profiles folder; malformed environment values. Each runs `vrambudget` as a user runs it
(vrambudget.cli.main, fast path included) and must give exit code 2 (bad input, README 'Exit codes'), exactly one
line on stderr that starts with 'error:' and names the input, nothing on stdout, no traceback, and leave every
file it was given as it was."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import struct
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pytest

from .cli_run import run


FIX = Path(__file__).parent / "fixtures"
AWQ = FIX / "models" / "qwen3.5-9b-awq"
LOG = FIX / "vllm-0.20.2-h200" / "logs" / "qwen3.5-9b_kv-fp8_graphs_mtp2_gmu0.17.log"


@dataclass
class Case:
    id: str
    argv: list[str]  # '{tmp}' is the case's own folder
    says: tuple[str, ...]  # what the one line must contain (the input it names, the fix)
    files: dict[str, bytes | str | Callable[[Path], None]] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)


def _qwen3(key: str, raw: str) -> str:
    """The bundled Qwen3-8B config with `key` set to the literal JSON text `raw` (1e400, NaN, -8 ...)."""
    from vrambudget.model.checkpoint import bundled_models

    cfg = dict(bundled_models()["qwen3-8b"]["config"], architectures=["Qwen3ForCausalLM"])
    cfg[key] = "@@"
    return json.dumps(cfg).replace('"@@"', raw)


def _record(**changes) -> str:
    """A real probe record (lab p1, RTX 3090 simulated on an H100) as one JSON line, with `changes`."""
    rec = json.loads((FIX / "lab-vllm-0.20.2-h100" / "p1" / "records.jsonl").read_text().splitlines()[0])
    return json.dumps({**rec, **changes})


def st(header: object, data: bytes = b"", length: int | None = None) -> bytes:
    """A safetensors file: its 8-byte header length (or a lying `length`), the header, then `data`."""
    raw = header if isinstance(header, bytes) else json.dumps(header).encode()
    return struct.pack("<Q", len(raw) if length is None else length) + raw + data


T = {"dtype": "BF16", "shape": [2, 2], "data_offsets": [0, 8]}  # a true 2x2 bf16 tensor


def cfg(**changes) -> str:
    base = json.loads((AWQ / "config.json").read_text())
    return json.dumps({**base, **changes})


def text_cfg(**changes) -> str:
    base = json.loads((AWQ / "config.json").read_text())
    base["text_config"] = {**base["text_config"], **changes}
    return json.dumps(base)


def model(c: str, **more) -> dict:
    return {"m/config.json": c, **more}


P = ["predict", "--gpu", "rtx3090"]
M = ["predict", "--gpu", "rtx3090", "--model", "{tmp}/m"]
REC = '{"kind": "startup", "outcome": "started"}\n'

CASES = [
    # -- flags: types -------------------------------------------------------------------------------------------
    Case("gmu-word", ["predict", "--gmu", "high"], ("'--gpu-memory-utilization'", "'high' is not a valid float")),
    Case("mnbt-word", ["predict", "--max-num-batched-tokens", "lots"], ("--max-num-batched-tokens", "not a valid")),
    Case("seqs-float", ["predict", "--max-num-seqs", "2.5"], ("--max-num-seqs", "not a valid int")),
    Case("tp-word", ["predict", "-tp", "two"], ("--tensor-parallel-size", "not a valid int")),
    Case("mtp-word", ["predict", "--mtp", "2", "x"], ("unexpected extra argument",)),
    Case("table-step-word", ["table", "--gmu-step", "small"], ("--gmu-step", "not a valid float")),
    Case("serve-port-word", ["serve-cmd", "--port", "http"], ("--port", "not a valid int")),
    Case("probe-timeout-word", ["probe", "--startup-timeout", "soon"], ("--startup-timeout", "not a valid float")),
    Case("probe-startups-word", ["probe", "--max-startups", "many"], ("--max-startups", "not a valid int")),
    Case("bool-with-value", ["predict", "--enforce-eager=yes"], ("--enforce-eager", "does not take a value")),
    Case("missing-value", ["predict", "--gpu"], ("--gpu", "requires an argument")),
    Case("unknown-flag", ["predict", "--gpus", "2"], ("No such option: --gpus",)),
    Case("unknown-command", ["predcit"], ("No such command 'predcit'",)),
    Case("extra-argument", ["predict", "qwen3.5-9b"], ("unexpected extra argument",)),
    Case("explain-no-log", ["explain"], ("Missing argument",)),
    Case("plan-no-target", ["plan", "--gpu", "4060ti"], ("--target-context",)),
    # -- flags: ranges ------------------------------------------------------------------------------------------
    Case("gmu-zero", ["predict", "--gmu", "0"], ("--gpu-memory-utilization", "(0, 1]")),
    Case("gmu-above-one", ["predict", "--gmu", "1.5"], ("--gpu-memory-utilization", "(0, 1]")),
    Case("gmu-negative", ["predict", "--gmu", "-0.2"], ("--gpu-memory-utilization", "(0, 1]")),
    Case("gmu-nan", ["predict", "--gmu", "nan"], ("--gpu-memory-utilization", "(0, 1]")),
    Case("gmu-inf", ["predict", "--gmu", "inf"], ("--gpu-memory-utilization", "(0, 1]")),
    Case("mtp-nine", ["predict", "--mtp", "9"], ("--mtp", "0<=x<=8")),
    Case("mtp-negative", ["predict", "--mtp", "-1"], ("--mtp",)),
    Case("seqs-zero", ["predict", "--max-num-seqs", "0"], ("--max-num-seqs", "x>=1")),
    Case("mnbt-zero", ["predict", "--max-num-batched-tokens", "0"], ("--max-num-batched-tokens", "x>=1")),
    Case("tp-zero", ["predict", "-tp", "0"], ("--tensor-parallel-size", "x>=1")),
    Case("mml-zero", ["predict", "--max-model-len", "0"], ("--max-model-len", "at least 1 token")),
    Case("mml-negative", ["predict", "--max-model-len", "-5"], ("--max-model-len",)),
    Case("mml-word", ["predict", "--max-model-len", "12q"], ("--max-model-len", "12q")),
    Case("mml-beyond-model", ["predict", "--max-model-len", "10000000"], ("10,000,000", "262,144")),
    Case("table-step-zero", ["table", "--gmu-step", "0"], ("--gmu-step",)),
    Case("table-min-above-max", ["table", "--gmu-min", "0.95", "--gmu-max", "0.9"], ("--gmu-min", "--gmu-max")),
    Case("table-max-above-one", ["table", "--gmu-max", "1.2"], ("--gmu-max",)),
    Case("table-mtp-nine", ["table", "--mtp", "9"], ("--mtp", "1<=x<=8")),
    Case("plan-mtp-zero", ["plan", "--target-context", "64k", "--mtp", "0"], ("--mtp", "1<=x<=8")),
    Case("target-word", ["predict", "--target-context", "long"], ("'long'", "tokens")),
    Case("target-zero", ["predict", "--target-context", "0"], ("--target-context",)),
    Case("plan-target-word", ["plan", "--target-context", "x"], ("'x'",)),
    Case("prompt-zero", ["predict", "--prompt-tokens", "0"], ("--prompt-tokens",)),
    Case("prompt-word", ["predict", "--prompt-tokens", "many"], ("'many'",)),
    Case("available-negative", ["predict", "--available-kv-gib", "-3"], ("--available-kv-gib",)),
    Case("available-word", ["predict", "--available-kv-gib", "some"], ("--available-kv-gib", "not a valid float")),
    Case("gpu-memory-unit", ["predict", "--gpu-memory", "12XB"], ("'12XB'", "GiB")),
    Case("gpu-memory-negative", ["predict", "--gpu-memory", "-5GiB"], ("--gpu-memory",)),
    Case("gpu-memory-zero", ["predict", "--gpu-memory", "0"], ("--gpu-memory",)),
    Case("gpu-memory-empty", ["predict", "--gpu-memory", ""], ("--gpu-memory",)),
    Case("other-usage-word", ["predict", "--other-gpu-usage", "lots"], ("'lots'",)),
    Case("other-usage-too-much", ["predict", "--gpu", "4060ti", "--other-gpu-usage", "20GiB"], ("--other-gpu-usage",)),
    Case("free-memory-word", ["predict", "--free-memory", "plenty"], ("'plenty'",)),
    Case("free-memory-above-total", ["predict", "--gpu", "4060ti", "--free-memory", "40GiB"], ("--free-memory",)),
    Case("serve-margin-word", ["serve-cmd", "--margin", "some"], ("--margin", "'some'")),
    Case("serve-margin-all", ["serve-cmd", "--margin", "100%"], ("--margin",)),
    Case("probe-startups-zero", ["probe", "--max-startups", "0"], ("--max-startups", "x>=1")),
    Case("probe-turns-negative", ["probe", "--turn-tokens", "-1"], ("--turn-tokens", "x>=0")),
    # -- flags: names that are not in a catalog -------------------------------------------------------------------
    Case("gpu-unknown", ["predict", "--gpu", "rtx9090"], ("'rtx9090'", "vrambudget gpus")),
    Case("gpu-empty", ["predict", "--gpu", ""], ("--gpu",)),
    Case("model-unknown", ["predict", "--model", "qwen9-1t"], ("'qwen9-1t'", "bundled")),
    Case("model-hub-offline", ["predict", "--model", "Qwen/Qwen2.5-7B-Instruct"], ("'Qwen/Qwen2.5-7B-Instruct'",
                                                                                "offline"),
         env={"HF_HUB_OFFLINE": "1", "HF_HOME": "{tmp}/hf"}),
    Case("model-missing-folder", ["predict", "--model", "./no/such/folder"], ("'./no/such/folder'",)),
    Case("kv-dtype-unknown", ["predict", "--kv-cache-dtype", "fp4"], ("'fp4'", "fp8")),
    Case("kv-dtype-empty", ["predict", "--kv-cache-dtype", ""], ("--kv-cache-dtype",)),
    Case("dtype-unknown", ["predict", "--dtype", "fp4"], ("--dtype 'fp4'", "bfloat16")),
    Case("dtype-bf16-on-a-t4", ["predict", "--gpu", "t4", "--dtype", "bfloat16"], ("compute capability 8.0", "half")),
    Case("compile-cache-unknown", ["predict", "--compile-cache", "lukewarm"], ("'lukewarm'", "warm")),
    Case("version-word", ["predict", "--vllm-version", "latest"], ("'latest'", "0.20.2")),
    Case("version-too-old", ["predict", "--vllm-version", "0.1.0"], ("0.1.0", "oldest")),
    Case("backend-unknown", ["predict", "--attention-backend", "FAST"], ("'FAST'", "TRITON_ATTN")),
    Case("lora-rank-without-lora", ["predict", "--max-lora-rank", "64"], ("--max-lora-rank", "--enable-lora")),
    Case("lora-slots-zero", ["predict", "--enable-lora", "--max-loras", "0"], ("--max-loras", "x>=1")),
    Case("simulated-on-unknown", ["predict", "--simulated-on", "tpu"], ("'tpu'",)),
    Case("simulated-on-smaller", ["predict", "--gpu", "h100", "--simulated-on", "4060ti"], ("--simulated-on",)),
    Case("probe-simulate-unknown", ["probe", "--simulate-gpu", "tpu"], ("'tpu'",)),
    Case("plan-format", ["plan", "--target-context", "64k", "--format", "yaml"], ("--format", "'yaml'", "systemd")),
    Case("serve-format", ["serve-cmd", "--format", "yaml"], ("--format", "'yaml'", "systemd")),
    # -- flags: combinations --------------------------------------------------------------------------------------
    Case("spec-not-json", ["predict", "--speculative-config", "{method: mtp"], ("--speculative-config", "JSON")),
    Case("spec-a-list", ["predict", "--speculative-config", "[1, 2]"], ("--speculative-config",)),
    Case("spec-method-unknown", ["predict", "--speculative-config", '{"method": "medusa9"}'], ("'medusa9'",)),
    Case("spec-negative-tokens", ["predict", "--speculative-config", '{"method": "mtp", "num_speculative_tokens": -1}'],
         ("num_speculative_tokens",)),
    Case("spec-and-mtp", ["predict", "--mtp", "2", "--speculative-config", '{"method": "mtp", "num_speculative_tokens": 3}'],
         ("--mtp", "--speculative-config")),
    Case("mtp-on-a-model-without", ["predict", "--model", "llama-3.1-8b", "--mtp", "2"], ("MTP",)),
    Case("tp-not-dividing-heads", ["predict", "--model", "qwen3.5-27b", "--gpu", "h100", "-tp", "3"],
         ("--tensor-parallel-size 3",)),
    Case("per-token-head-with-fa", ["predict", "--kv-cache-dtype", "fp8_per_token_head", "--attention-backend",
                                    "FLASH_ATTN"], ("fp8_per_token_head", "FLASH_ATTN")),
    Case("target-with-available", ["predict", "--target-context", "64k", "--available-kv-gib", "2"],
         ("--target-context", "--available-kv-gib")),
    Case("serve-out-exists", ["serve-cmd", "--checkpoint", "me/x", "--out", "{tmp}/unit.service"], ("--force",),
         {"unit.service": "mine"}),
    # -- environment --------------------------------------------------------------------------------------------
    Case("alloc-conf-no-colon", P, ("PYTORCH_CUDA_ALLOC_CONF", "key:value"),
         env={"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments"}),
    Case("alloc-conf-bad-bool", P, ("expandable_segments:maybe", "True or False"),
         env={"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:maybe"}),
    Case("alloc-conf-empty-items", P, ("PYTORCH_CUDA_ALLOC_CONF",), env={"PYTORCH_CUDA_ALLOC_CONF": ",,"}),
    Case("alloc-conf-no-value", P, ("PYTORCH_CUDA_ALLOC_CONF",),
         env={"PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:"}),
    Case("fi-workspace-word", P, ("VLLM_FLASHINFER_WORKSPACE_BUFFER_SIZE", "'big'"),
         env={"VLLM_FLASHINFER_WORKSPACE_BUFFER_SIZE": "big"}),
    Case("fi-workspace-negative", P, ("VLLM_FLASHINFER_WORKSPACE_BUFFER_SIZE",),
         env={"VLLM_FLASHINFER_WORKSPACE_BUFFER_SIZE": "-1"}),
    Case("fi-workspace-float", P, ("VLLM_FLASHINFER_WORKSPACE_BUFFER_SIZE",),
         env={"VLLM_FLASHINFER_WORKSPACE_BUFFER_SIZE": "1.5e9"}),
    Case("home-is-a-file", ["fit", str(LOG), "--vllm-version", "0.20.2", "--model", "qwen3.5-9b"],
         ("cannot write", "VRAMBUDGET_HOME"), {"home": "not a folder"}, env={"VRAMBUDGET_HOME": "{tmp}/home"}),
    Case("allow-long-word", P, ("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "'yes'"), env={"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "yes"}),
    # -- config.json: broken, partial, foreign ------------------------------------------------------------------
    Case("config-empty", M, ("config.json", "not valid JSON"), model("")),
    Case("config-not-json", M, ("config.json", "not valid JSON"), model("{'hidden_size': 4096")),
    Case("config-a-list", M, ("config.json", "not a JSON object"), model("[1, 2, 3]")),
    Case("config-no-layers", M, ("'num_hidden_layers'",), model(text_cfg(num_hidden_layers=None))),
    Case("config-hidden-word", M, ("hidden_size", "'big'"), model(text_cfg(hidden_size="big"))),
    Case("config-heads-negative", M, ("num_attention_heads",), model(text_cfg(num_attention_heads=-16))),
    Case("config-kv-heads-zero", M, ("num_key_value_heads",), model(text_cfg(num_key_value_heads=0))),
    Case("config-heads-not-divisible", M, ("num_attention_heads", "num_key_value_heads"),
         model(text_cfg(num_attention_heads=16, num_key_value_heads=3))),
    Case("config-vocab-zero", M, ("vocab_size",), model(text_cfg(vocab_size=0))),
    Case("config-text-config-number", M, ("text_config",), model(cfg(text_config=5))),
    Case("config-layer-types-short", M, ("layer_types",), model(text_cfg(layer_types=["full_attention"] * 3))),
    Case("config-layer-type-unknown", M, ("'diffusion'",),
         model(text_cfg(layer_types=["diffusion"] * 32, full_attention_interval=None))),
    Case("config-gdn-missing", M, ("linear_num_key_heads",), model(text_cfg(linear_num_key_heads=None))),
    Case("config-dtype-unknown", M, ("'bfloat17'",), model(text_cfg(dtype="bfloat17"))),
    Case("config-quant-bits", M, ("bits",), model(cfg(quantization_config={"quant_method": "awq", "bits": 3,
                                                                          "group_size": 128}))),
    Case("config-quant-not-dict", M, ("quantization_config",), model(cfg(quantization_config="awq"))),
    Case("config-diffusers", M, ("'num_hidden_layers'",),
         model(json.dumps({"_class_name": "UNet2DConditionModel", "in_channels": 4}))),
    Case("config-tokenizer", M, ("'num_hidden_layers'",), model(json.dumps({"tokenizer_class": "Qwen2Tokenizer"}))),
    Case("config-mla", M, ("MLA",), model(json.dumps({"model_type": "llama", "num_hidden_layers": 4, "hidden_size": 1024,
                                                      "num_attention_heads": 8, "vocab_size": 1000,
                                                      "kv_lora_rank": 512}))),
    Case("config-unknown-family", M, ("MambaForCausalLM", "not a family vrambudget plans"),
         model(json.dumps({"architectures": ["MambaForCausalLM"], "model_type": "mamba", "num_hidden_layers": 4,
                           "hidden_size": 1024, "vocab_size": 1000}))),
    Case("folder-without-config", M, ("no config.json",), {"m/README.md": "weights elsewhere"}),
    Case("model-is-a-file", ["predict", "--model", "{tmp}/config.json"], ("config.json", "folder"),
         {"config.json": cfg()}),
    # -- safetensors headers that lie ---------------------------------------------------------------------------
    Case("st-lfs-pointer", M, ("Git LFS pointer", "git lfs pull"),
         model(cfg(), **{"m/model.safetensors": "version https://git-lfs.github.com/spec/v1\noid sha256:ab\nsize 9\n"})),
    Case("st-too-short", M, ("model.safetensors", "too short"), model(cfg(), **{"m/model.safetensors": b"\x10\x00"})),
    Case("st-length-lies", M, ("model.safetensors", "header"),
         model(cfg(), **{"m/model.safetensors": st({"w": T}, b"\0" * 8, length=10_000)})),
    Case("st-header-not-json", M, ("model.safetensors", "not JSON"),
         model(cfg(), **{"m/model.safetensors": st(b"{not json at all}", b"\0" * 8)})),
    Case("st-header-a-list", M, ("model.safetensors",), model(cfg(), **{"m/model.safetensors": st([1, 2], b"")})),
    Case("st-dtype-unknown", M, ("'F7'",),
         model(cfg(), **{"m/model.safetensors": st({"w": {**T, "dtype": "F7"}}, b"\0" * 8)})),
    Case("st-shape-negative", M, ("shape",),
         model(cfg(), **{"m/model.safetensors": st({"w": {**T, "shape": [-2, 2]}}, b"\0" * 8)})),
    Case("st-shape-word", M, ("shape",),
         model(cfg(), **{"m/model.safetensors": st({"w": {**T, "shape": "2x2"}}, b"\0" * 8)})),
    Case("st-truncated", M, ("model.safetensors", "truncated"),
         model(cfg(), **{"m/model.safetensors": st({"w": {**T, "shape": [1000, 1000],
                                                           "data_offsets": [0, 2_000_000]}}, b"\0" * 8)})),
    Case("st-size-lies", M, ("model.safetensors", "'w'"),
         model(cfg(), **{"m/model.safetensors": st({"w": {**T, "shape": [4, 4]}}, b"\0" * 8)})),
    Case("st-no-offsets", M, ("data_offsets",),
         model(cfg(), **{"m/model.safetensors": st({"w": {"dtype": "BF16", "shape": [2, 2]}}, b"\0" * 8)})),
    Case("st-tensor-not-dict", M, ("'w'",), model(cfg(), **{"m/model.safetensors": st({"w": 7}, b"")})),
    Case("st-index-missing-shard", M, ("model.safetensors.index.json", "missing"),
         model(cfg(), **{"m/model-00001-of-00002.safetensors": st({"w": T}, b"\0" * 8),
                         "m/model.safetensors.index.json": json.dumps({"weight_map": {
                             "w": "model-00001-of-00002.safetensors", "v": "model-00002-of-00002.safetensors"}})})),
    Case("st-index-not-json", M, ("model.safetensors.index.json", "not valid JSON"),
         model(cfg(), **{"m/model-00001-of-00002.safetensors": st({"w": T}, b"\0" * 8),
                         "m/model.safetensors.index.json": "{weight_map"})),
    Case("st-index-map-a-list", M, ("weight_map",),
         model(cfg(), **{"m/model-00001-of-00002.safetensors": st({"w": T}, b"\0" * 8),
                         "m/model.safetensors.index.json": json.dumps({"weight_map": ["a"]})})),
    # -- logs -----------------------------------------------------------------------------------------------------
    Case("log-missing", ["explain", "{tmp}/nope.log"], ("nope.log", "does not exist")),
    Case("log-a-folder", ["explain", "{tmp}"], ("is a folder", "the file itself")),
    Case("log-empty", ["explain", "{tmp}/empty.log"], ("empty.log", "no vLLM"), {"empty.log": ""}),
    Case("log-binary", ["explain", "{tmp}/core.bin"], ("core.bin", "no vLLM"), {"core.bin": bytes(range(256)) * 40}),
    Case("log-nginx", ["explain", "{tmp}/access.log"], ("access.log", "no vLLM"),
         {"access.log": '127.0.0.1 - - [23/Nov/2026:10:00:00 +0000] "GET / HTTP/1.1" 200 612 "-" "curl/8.0"\n' * 20}),
    Case("log-llama-cpp", ["explain", "{tmp}/llama.log"], ("llama.log", "no vLLM"),
         {"llama.log": "llama_model_loader: loaded meta data with 33 key-value pairs\nllm_load_tensors: "
                       "CUDA0 buffer size = 4403.49 MiB\nllama_new_context_with_model: n_ctx = 8192\n"}),
    Case("log-cut-before-args", ["explain", "{tmp}/cut.log"], ("cut.log",),
         {"cut.log": lambda d: (d / "cut.log").write_text(
             "".join(LOG.read_text().splitlines(True)[:3]))}),
    # -- probe records and profiles ---------------------------------------------------------------------------------
    Case("records-missing", ["fit", "{tmp}/nope.jsonl", "--vllm-version", "0.20.2"], ("nope.jsonl", "does not exist")),
    Case("records-broken-line", ["fit", "{tmp}/r.jsonl", "--vllm-version", "0.20.2"], ("r.jsonl", "line 2"),
         {"r.jsonl": REC + "{broken\n"}),
    Case("records-not-objects", ["fit", "{tmp}/r.jsonl", "--vllm-version", "0.20.2"], ("r.jsonl", "line 1"),
         {"r.jsonl": "[1, 2]\n"}),
    Case("records-empty", ["fit", "{tmp}/r.jsonl", "--vllm-version", "0.20.2"], ("nothing to fit",), {"r.jsonl": ""}),
    Case("records-wrong-types", ["fit", "{tmp}/r.jsonl", "--vllm-version", "0.20.2"], ("r.jsonl",),
         {"r.jsonl": json.dumps({"kind": "startup", "outcome": "started", "gmu": "high", "inputs": "x",
                                 "facts": [1]}) + "\n"}),
    Case("records-a-folder", ["fit", "{tmp}", "--vllm-version", "0.20.2"], ("no probe records",)),
    Case("records-torn-last-line-only", ["fit", "{tmp}/r.jsonl", "--vllm-version", "0.20.2"], ("nothing to fit",),
         {"r.jsonl": '{"kind": "startup", "outc'}),
    Case("table-records-broken", ["table", "--plot", "{tmp}/t.png", "--records", "{tmp}/r.jsonl"], ("r.jsonl",),
         {"r.jsonl": "{broken\n"}),
    Case("profile-corrupt", ["predict", "--gpu", "rtx3090", "--vllm-version", "0.20.2"],
         ("rtx3090__qwen3.5-9b-awq.json", "not valid JSON", "vrambudget fit"),
         {"home/profiles/vllm-0.20/rtx3090__qwen3.5-9b-awq.json": "{\"coefficients\": {"},
         env={"VRAMBUDGET_HOME": "{tmp}/home"}),
    Case("profile-not-a-profile", ["predict", "--gpu", "rtx3090", "--vllm-version", "0.20.2"],
         ("rtx3090__qwen3.5-9b-awq.json", "not a coefficient profile"),
         {"home/profiles/vllm-0.20/rtx3090__qwen3.5-9b-awq.json": "[]"}, env={"VRAMBUDGET_HOME": "{tmp}/home"}),
    Case("profile-bad-value", ["predict", "--gpu", "rtx3090", "--vllm-version", "0.20.2"],
         ("rtx3090__qwen3.5-9b-awq.json", "activation"),
         {"home/profiles/vllm-0.20/rtx3090__qwen3.5-9b-awq.json": json.dumps(
             {"coefficients": {"activation_per_token_bytes": {"value": "lots"}}})},
         env={"VRAMBUDGET_HOME": "{tmp}/home"}),
    Case("probe-runs-dir-a-file", ["probe", "--gpu", "rtx3090", "--model", "qwen3.5-9b", "--runs-dir", "{tmp}/runs"],
         ("runs",), {"runs": "a file"}),
    # issue 36: numbers and files from outside, bounded
    *[Case(f"config-{key}-{label}", ["predict", "--gpu", "h100", "-m", "{tmp}/m"], (key.split(".")[-1],),
           {"m/config.json": _qwen3(key, raw)})
      for key, label, raw in (("num_hidden_layers", "1e400", "1e400"), ("num_hidden_layers", "NaN", "NaN"),
                              ("num_hidden_layers", "1e9", "1000000000"), ("hidden_size", "negative", "-4096"),
                              ("num_key_value_heads", "fraction", "2.5"), ("vocab_size", "infinity", "Infinity"),
                              ("num_experts", "negative", "-8"), ("head_dim", "huge", "99999999999999999"),
                              ("architectures", "number", "7"), ("num_attention_heads", "string", '"many"'))],
    Case("config-nested-deep", ["predict", "--gpu", "h100", "-m", "{tmp}/m"], ("nests deeper",),
         {"m/config.json": "[" * 5000 + "]" * 5000}),
    Case("config-not-utf8", ["predict", "--gpu", "h100", "-m", "{tmp}/m"], ("config.json",),
         {"m/config.json": b"\xff\xfe\xfa\x00{garbage"}),
    Case("config-a-device", ["predict", "--gpu", "h100", "-m", "{tmp}/m"], ("not a regular file",),
         {"m/x": lambda t: (t / "m" / "config.json").symlink_to("/dev/zero")}),
    Case("log-a-device", ["explain", "/dev/zero"], ("not a regular file",)),
    # counts a log states past any real run: read from the engine's compile ranges, the chunked-prefill line or the
    # non-default args, each refused rather than planned (a 1e32-token batch once gave an activation of 8e27 GiB)
    Case("log-compile-range-huge", ["explain", "{tmp}/r.log", "-m", "qwen3-8b", "-g", "h100"],
         ("99999999999999999999999999999999 is not a count",),
         {"r.log": "INFO x [core.py:1] Initializing a V1 LLM engine (v0.26.0) with config: model='m', "
                   "'compile_ranges_endpoints': [99999999999999999999999999999999]\n"}),
    Case("log-chunked-huge", ["explain", "{tmp}/c.log", "-m", "qwen3-8b", "-g", "h100"], ("is not a count",),
         {"c.log": "INFO x [core.py:1] Initializing a V1 LLM engine (v0.26.0) with config: model='m'\n"
                   "INFO [scheduler.py:1] Chunked prefill is enabled with max_num_batched_tokens=10000000000000.\n"}),
    Case("log-pp-huge", ["explain", "{tmp}/p.log", "-m", "qwen3-8b", "-g", "h100"], ("a stage would hold none",),
         {"p.log": "INFO x non-default args: {'pipeline_parallel_size': 99999999999}\n"
                   "INFO x [core.py:1] Initializing a V1 LLM engine (v0.26.0) with config: model='m'\n"}),
    Case("pp-more-than-layers", ["predict", "-m", "qwen3-8b", "-g", "h100", "-pp", "100000000"],
         ("--pipeline-parallel-size 100000000", "36 layers")),
    Case("model-name-100k", ["predict", "-m", "x" * 100_000], ("--model", "characters long")),
    Case("gpu-name-newline", ["predict", "--gpu", "rtx4090\nrm -rf"], ("--gpu", "control characters")),
    Case("records-gpu-key-path", ["fit", "{tmp}/r.jsonl"], ("GPU key",),
         {"r.jsonl": lambda t: (t / "r.jsonl").write_text(_record(gpu_key="../../escape") + "\n")}),
    Case("records-nan", ["fit", "{tmp}/r.jsonl", "--gpu", "h100"], ("line 1",),
         {"r.jsonl": lambda t: (t / "r.jsonl").write_text(
             _record().replace('"available_kv_gib": 4.55', '"available_kv_gib": NaN') + "\n")}),
    Case("records-negative", ["fit", "{tmp}/r.jsonl", "--gpu", "h100"], ("record",),
         {"r.jsonl": lambda t: (t / "r.jsonl").write_text(
             _record().replace('"requested_bytes": ', '"requested_bytes": -') + "\n")}),
    Case("servecmd-margin-negative", ["serve-cmd", "--gpu", "h100", "-m", "qwen3-8b", "--margin=-5%"], ("--margin",)),
    Case("servecmd-port", ["serve-cmd", "--gpu", "h100", "-m", "qwen3-8b", "--port", "99999"], ("--port",)),
    Case("servecmd-checkpoint-newline", ["serve-cmd", "--gpu", "h100", "-m", "qwen3-8b", "--format", "systemd",
                                         "--checkpoint", "/m\nExecStartPre=/bin/evil"], ("--checkpoint",)),
    Case("probe-timeout-nan", ["probe", "--gpu", "h100", "-m", "qwen3.5-9b", "--runs-dir", "{tmp}/runs",
                               "--startup-timeout", "nan"], ("--startup-timeout",)),
    Case("probe-timeout-negative", ["probe", "--gpu", "h100", "-m", "qwen3.5-9b", "--runs-dir", "{tmp}/runs",
                                    "--startup-timeout", "-1"], ("--startup-timeout",)),
    # -- round 3 (issue 44): figures past any machine, quantization fields, flags that contradict ----------------
    Case("gpu-memory-400-digits", ["predict", "--gpu-memory", "9" * 400 + "GiB"], ("--gpu-memory", "403 characters",
                                                                                     "more than any GPU")),
    Case("free-memory-400-digits", ["predict", "-g", "h100", "--free-memory", "9" * 400], ("--free-memory",)),
    Case("available-kv-inf", ["predict", "-g", "h100", "--available-kv-gib", "inf"], ("--available-kv-gib",)),
    Case("vllm-version-5000-digits", ["predict", "-g", "h100", "--vllm-version", "0." + "3" * 5000],
         ("vLLM version", "5,002 characters")),
    Case("max-model-len-400-digits", ["predict", "-g", "h100", "--max-model-len", "9" * 400],
         ("--max-model-len", "more tokens than any model")),
    Case("probe-poll-1e308", ["probe", "--gpu", "h100", "-m", "qwen3.5-9b", "--runs-dir", "{tmp}/runs",
                              "--poll-seconds", "1e308"], ("--poll-seconds", "30 days")),
    Case("quant-config-empty", ["predict", "-g", "h100", "-m", "{tmp}/m"], ("quantization_config", "quant_method"),
         {"m/config.json": _qwen3("quantization_config", "{}")}),
    Case("quant-group-size-0", ["predict", "-g", "h100", "-m", "{tmp}/m"], ("group_size is 0",),
         {"m/config.json": _qwen3("quantization_config", '{"quant_method": "awq", "bits": 4, "group_size": 0}')}),
    Case("quant-bits-word", ["predict", "-g", "h100", "-m", "{tmp}/m"], ("quantization_config.bits", "'four'"),
         {"m/config.json": _qwen3("quantization_config", '{"quant_method": "gptq", "bits": "four"}')}),
    Case("target-and-max-model-len", ["predict", "-g", "h100", "-m", "qwen3-8b", "--max-model-len", "32k",
                                      "--target-context", "64k"], ("--target-context 65,536", "give one")),
    Case("target-and-gmu", ["predict", "-g", "h100", "-m", "qwen3-8b", "--gmu", "0.9", "--target-context", "32k"],
         ("--target-context", "GMU itself")),
    Case("log-400-digit-figure", ["explain", "{tmp}/big.log", "--json"], ("impossible available_kv",),
         {"big.log": "INFO x [v1/worker/gpu_worker.py:560] Available KV cache memory: " + "9" * 400 + " GiB\n"}),
    Case("log-two-servers-interleaved", ["explain", "{tmp}/two.log"], ("interleaves two vLLM servers",),
         {"two.log": lambda t: (t / "two.log").write_text("".join(
             a + b for a, b in zip(*(((FIX / "lab-vllm-0.33.0-h200" / "defaults" / f"{n}.log").read_text()
                                      .splitlines(keepends=True)) for n in ("q8-d-cold", "l8-d-cold")))))}),
    Case("records-simulated-context-h200-and-3090", ["fit", "{tmp}/a.jsonl", "{tmp}/b.jsonl"], ("2 cards",),
         {"a.jsonl": lambda t: (t / "a.jsonl").write_text(
             (FIX / "probe-vllm-0.20.2-h200" / "g2" / "records.jsonl").read_text()),
          "b.jsonl": lambda t: (t / "b.jsonl").write_text(_record(gpu_name="NVIDIA GeForce RTX 3090") + "\n")}),
    Case("records-peak-500gib", ["fit", "{tmp}/r.jsonl", "--gpu", "h100"], ("activation peak", "not what a card"),
         {"r.jsonl": lambda t: (t / "r.jsonl").write_text(
             _record().replace('"activation_gib": ', '"activation_gib": 500, "_x": ') + "\n")}),
    Case("records-peak-1e29", ["fit", "{tmp}/r.jsonl", "--gpu", "h100"], ("record 1",),
         {"r.jsonl": lambda t: (t / "r.jsonl").write_text(
             _record().replace('"activation_gib": ', '"activation_gib": 1e29, "_x": ') + "\n")}),
]


def snapshot(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input_is_one_line_exit_2_and_touches_nothing(case, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("VRAMBUDGET_HOME", str(tmp_path / "home"))
    for k in ("PYTORCH_CUDA_ALLOC_CONF", "VLLM_FLASHINFER_WORKSPACE_BUFFER_SIZE"):
        monkeypatch.delenv(k, raising=False)
    for k, v in case.env.items():
        monkeypatch.setenv(k, v.replace("{tmp}", str(tmp_path)))
    for name, content in case.files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if callable(content):
            content(tmp_path)
        elif isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
    before = snapshot(tmp_path)
    code, out, err = run([a.replace("{tmp}", str(tmp_path)) for a in case.argv], capsys)
    lines = err.splitlines()
    assert (code, out) == (2, ""), (code, out, err)
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    for s in case.says:
        assert s in lines[0], (s, lines[0])
    assert snapshot(tmp_path) == before  # nothing the user had is touched


def test_the_corpus_has_at_least_100_cases():
    assert len({c.id for c in CASES}) == len(CASES) >= 100


def _read_only(folder: Path) -> Callable[[], None]:
    """Make `folder` read-only for this process (root ignores permission bits: the immutable attribute then),
    and return how to undo it; skip where neither is possible."""
    if os.geteuid() != 0:
        folder.chmod(0o555)
        return lambda: folder.chmod(0o755)
    if shutil.which("chattr") and subprocess.run(["chattr", "+i", str(folder)], capture_output=True).returncode == 0:
        return lambda: subprocess.run(["chattr", "-i", str(folder)], check=True)
    pytest.skip("cannot make a folder read-only here (root without chattr)")


def test_a_read_only_profiles_folder_is_one_line_and_the_profile_stays(tmp_path, capsys, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("VRAMBUDGET_HOME", str(home))
    logs = [str(LOG)]
    code, _, err = run(["fit", *logs, "--vllm-version", "0.20.2", "--gpu", "h200", "--model", "qwen3.5-9b"], capsys)
    assert code == 0, err
    profile = next(home.rglob("*.json"))
    before = snapshot(home)
    undo = _read_only(profile.parent)
    try:
        code, out, err = run(["fit", *logs, "--vllm-version", "0.20.2", "--gpu", "h200", "--model", "qwen3.5-9b"],
                             capsys)
    finally:
        undo()
    assert code == 2 and len(err.splitlines()) == 1 and "cannot write" in err and str(profile.parent) in err, err
    assert snapshot(home) == before


def test_a_bug_is_one_line_and_exit_3_with_the_traceback_on_request(capsys, monkeypatch):
    import vrambudget.prediction

    def broken(*a, **k):
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr(vrambudget.prediction, "answer", broken)
    code, out, err = run(["predict"], capsys)
    assert code == 3 and out == "" and err.count("\n") == 1 and "this is a bug, not your input" in err
    monkeypatch.setenv("VRAMBUDGET_DEBUG", "1")
    with pytest.raises(ZeroDivisionError):
        run(["predict"], capsys)


PARTIAL = sorted((FIX / "public-logs").glob("*.log"))


def _cuts():
    """A real startup log cut at every tenth of its lines (as a paste into an issue cuts it)."""
    lines = LOG.read_text().splitlines(True)
    return [(f"cut-{k}0pct", "".join(lines[:len(lines) * k // 10])) for k in range(1, 10)]


@pytest.mark.parametrize("name,text", [(p.name, p.read_text()) for p in PARTIAL] + _cuts(),
                         ids=[p.name for p in PARTIAL] + [n for n, _ in _cuts()])
def test_a_cut_or_partial_log_is_explained_with_what_it_lacks(name, text, tmp_path, capsys):
    """issue 22: `explain` on a cut or odd log says what it still states and which lines are missing; never a
    traceback. A cut too early to hold any vLLM line is bad input (one line, exit 2)."""
    (tmp_path / name).write_text(text)
    code, out, err = run(["explain", str(tmp_path / name)], capsys)
    assert "Traceback" not in out + err
    if code == 2:
        assert "has no vLLM startup lines" in err and err.count("\n") == 1
        return
    assert code == 0 and err == "", err
    if "a partial vLLM log" in out:
        first = out.splitlines()[0]
        assert "no prediction to compare: " in first and ("missing: " in out or "it states" in out)
    else:
        assert "logged GiB" in out  # the full comparison
