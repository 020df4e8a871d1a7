#!/usr/bin/env bash
# Build the offline vLLM 0.26.0 bundle for the GPU host (Python 3.12, torch 2.11.0+cu130; host-freeze-h100.txt)
# from vllm-0.26.0-bundle.txt, the same way ../shared/gpu-lab/build-bundle.sh builds 0.20.2's.
# Usage: benchmarks/lab/build-bundle-0.26.sh OUTDIR [WHEELDIR]   -> OUTDIR/part-aa, part-ab, ... (44 MB each, so one part and the working tree fit a 64 MiB device call)
# Left out, so that the parts stay few enough to carry (one part per device call):
#  - kernel packages a Qwen3.5 / Gemma 4 startup on Hopper does not import (vLLM imports them lazily, for other
#    GPUs or features): tilelang, tokenspeed-mla/-triton, humming-kernels, cuda-tile, torchcodec, PyNvVideoCodec,
#    z3-solver, nvidia-cuda-nvcc/-crt/-nvvm/-nvdisasm/-cccl (the host has nvcc in /usr/local/cuda);
#  - nvidia-cutlass-dsl (227 MB unpacked) and quack-kernels: read in the source, FlashInfer 0.6.14's SM90 GDN
#    prefill (vLLM 0.26.0's default on Hopper) is a CuTe-DSL kernel that needs them, and Gemma 4's FA4 path too;
#    the lab runs Qwen3.5 with --gdn-prefill-backend triton (the FLA path every consumer GPU takes) instead;
#  - numba 0.65.0 / llvmlite / numpy: vLLM 0.26.0 pins numba but imports it only for the n-gram drafter and one
#    processor; the host's numba 0.68 / numpy 2.5 stay;
#  - vLLM's FA2 kernels (pre-Hopper GPUs) and DeepGEMM headers, as for 0.20.2.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?OUTDIR}; wheels=${2:-$out/wheels}
skip='^(tilelang|tokenspeed_mla|tokenspeed_triton|humming_kernels|cuda_tile|torchcodec|pynvvideocodec|z3_solver|nvidia_cuda_nvcc|nvidia_cuda_crt|nvidia_nvvm|nvidia_cuda_nvdisasm|nvidia_cuda_cccl|nvidia_cutlass_dsl|nvidia_cutlass_dsl_libs_base|nvidia_cutlass_dsl_libs_core|nvidia_cutlass_dsl_libs_cu12|nvidia_cutlass_dsl_libs_cu13|quack_kernels|numba|llvmlite|numpy)=='
mkdir -p "$wheels" && rm -rf "$out/site" "$out"/part-* && mkdir -p "$out/site"
grep -v '^#' "$here/vllm-0.26.0-bundle.txt" | grep -vE "$skip" > "$out/wanted.txt"
plat=()
for p in manylinux_2_35_x86_64 manylinux_2_34_x86_64 manylinux_2_31_x86_64 manylinux_2_28_x86_64 \
         manylinux_2_27_x86_64 manylinux_2_24_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 \
         manylinux1_x86_64 linux_x86_64 any; do plat+=(--platform "$p"); done
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  "${plat[@]}" -d "$wheels" -r "$out/wanted.txt"
python3 - "$out" "$wheels" <<'PY'
import glob, re, sys, zipfile
out, wheels = sys.argv[1:]
wanted = {l.split("==")[0].lower().replace("-", "_") for l in open(f"{out}/wanted.txt") if "==" in l}
for w in sorted(glob.glob(f"{wheels}/*.whl")):
    name = re.split(r"-\d", w.rsplit("/", 1)[1], 1)[0].lower().replace("-", "_")
    if name in wanted:
        zipfile.ZipFile(w).extractall(f"{out}/site")
PY
rm -f "$out/site/vllm/vllm_flash_attn/_vllm_fa2_C.abi3.so"
rm -rf "$out/site/vllm/third_party/deep_gemm/include"
tar -C "$out/site" -cf - . | xz -T0 -6 | split -b 44M - "$out/part-"
ls -l "$out"/part-*
