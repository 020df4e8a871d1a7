#!/usr/bin/env bash
# Build the offline vLLM 0.33.0 bundle for the GPU host (Python 3.12, torch 2.11.0+cu130, no registry:
# host-freeze-h100.txt) from vllm-0.33.0-bundle.txt: torch 2.14.0, triton 3.8.0 and NCCL 2.30.7 travel in it, so the
# host runs vLLM 0.33.0 on the torch users get with it (the bundle's site folder goes first on PYTHONPATH; the plan's
# `setup` links the host's CUDA 13 libraries into the site folder's nvidia/, where torch 2.14's RPATH looks).
#
# Usage: benchmarks/lab/build-bundle-0.33.sh OUTDIR [WHEELDIR]   -> OUTDIR/part-aa, part-ab, ... of PART_MB MiB each
#        (default 30: one part and the ~30 MB working tree fit a 64 MiB device call; the plan names the part folder)
#
# Left out, so that the parts stay few enough to carry (one part per device call):
#  - packages a language-model startup on Hopper does not import (vLLM imports them lazily, for other GPUs or
#    features), as in the 0.26 bundle: tilelang, tokenspeed-mla/-triton, humming-kernels, cuda-tile, torchcodec,
#    PyNvVideoCodec, z3-solver, nvidia-cuda-nvcc/-crt/-nvvm/-cccl (the host has nvcc in /usr/local/cuda),
#    nvidia-cutlass-dsl and quack-kernels (FlashInfer's SM90 GDN prefill and FA4: the lab runs Qwen3.5 with
#    --gdn-prefill-backend triton, the path every consumer GPU takes);
#  - numpy, numba / llvmlite, setuptools and the CUDA 13.0 libraries other than NCCL: the host's serve (see
#    vllm-0.33.0-bundle.txt);
#  - inside wheels: vLLM's FA2 kernels (pre-Hopper GPUs, 308 MB), the Rust frontend vllm-rs (off unless
#    VLLM_USE_RUST_FRONTEND=1), the DeepGEMM and SM100 FMHA headers (JIT for FP8-block linears and Blackwell: the lab
#    runs bf16 and MXFP4 checkpoints); Triton's CUPTI libraries and ptxas-blackwell (the profiler and SM100+);
#    torch's C++ headers (torch.compile's CUDA path emits Triton, not C++).
set -euo pipefail
die() { echo "build-bundle-0.33.sh: $*" >&2; exit 2; }
[ $# -ge 1 ] && [ $# -le 2 ] || die "usage: build-bundle-0.33.sh OUTDIR [WHEELDIR]"
here=$(cd "$(dirname "$0")" && pwd)
out=$1; wheels=${2:-$1/wheels}
[ -n "$out" ] || die "OUTDIR is empty"
[ ! -e "$out" ] || [ -d "$out" ] || die "OUTDIR $out exists and is not a folder"
[ ! -e "$wheels" ] || [ -d "$wheels" ] || die "WHEELDIR $wheels exists and is not a folder"
part_mb=${PART_MB:-30}
[[ "$part_mb" =~ ^[0-9]{1,2}$ ]] && [ "$part_mb" -ge 1 ] && [ "$part_mb" -le 60 ] ||
  die "PART_MB must be a whole number of MiB from 1 to 60 (one part and the working tree fit a 64 MiB call), not '$part_mb'"
for tool in python3 xz tar split; do command -v "$tool" >/dev/null || die "needs $tool on PATH"; done
mkdir -p "$wheels" "$out" 2>/dev/null || die "cannot make $out or $wheels"
[ -w "$out" ] || die "cannot write into $out"
rm -rf "$out/site" "$out"/part-* && mkdir -p "$out/site"
skip='^(tilelang|tokenspeed_mla|tokenspeed_triton|humming_kernels|cuda_tile|torchcodec|pynvvideocodec|z3_solver|nvidia_cuda_nvcc|nvidia_cuda_crt|nvidia_nvvm|nvidia_cuda_nvdisasm|nvidia_cuda_cccl|nvidia_cutlass_dsl|nvidia_cutlass_dsl_libs_base|nvidia_cutlass_dsl_libs_core|nvidia_cutlass_dsl_libs_cu12|nvidia_cutlass_dsl_libs_cu13|quack_kernels|numba|llvmlite|numpy|setuptools)=='
grep -v '^#' "$here/vllm-0.33.0-bundle.txt" | grep -vE "$skip" > "$out/wanted.txt"
plat=()
for p in 39 38 36 35 34 31 29 28 27 26 24 18 17; do plat+=(--platform "manylinux_2_${p}_x86_64"); done
plat+=(--platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform linux_x86_64 --platform any)
PIP_CONFIG_FILE=/dev/null python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
  --implementation cp "${plat[@]}" -d "$wheels" -r "$out/wanted.txt" || die "pip could not download the wheels into $wheels"
python3 - "$out" "$wheels" <<'PY'
import glob, os, re, sys, zipfile
out, wheels = sys.argv[1:]
wanted = {l.split("==")[0].lower().replace("-", "_") for l in open(f"{out}/wanted.txt") if "==" in l}
found = set()
for w in sorted(glob.glob(f"{wheels}/*.whl")):
    name = re.split(r"-\d", w.rsplit("/", 1)[1], maxsplit=1)[0].lower().replace("-", "_")
    if name in wanted:
        with zipfile.ZipFile(w) as z:
            for info in z.infolist():  # extractall drops the execute bits pip keeps (Triton's ptxas needs them)
                path = z.extract(info, f"{out}/site")
                if (info.external_attr >> 16) & 0o111:
                    os.chmod(path, 0o755)
        found.add(name)
missing = sorted(wanted - found)
if missing:
    sys.exit(f"build-bundle-0.33.sh: no wheel in {wheels} for {', '.join(missing)}")
PY
s=$out/site
rm -f "$s/vllm/vllm_flash_attn/_vllm_fa2_C.abi3.so" "$s/vllm/vllm-rs"
rm -rf "$s/vllm/third_party/deep_gemm/include" "$s/vllm/third_party/fmha_sm100/cutlass" "$s/torch/include"
rm -rf "$s/triton/backends/nvidia/lib/cupti" "$s/triton/backends/nvidia/lib/cupti-blackwell"
rm -f "$s/triton/backends/nvidia/bin/ptxas-blackwell" "$s/triton/instrumentation/libGPUInstrumentationTestLib.so" \
      "$s/triton/plugins/libTritonPluginsTestLib.so"
find "$s" -name '__pycache__' -prune -exec rm -rf {} +
tar -C "$s" -cf - . | xz -T0 -6 | split -b "${part_mb}M" - "$out/part-"
ls -l "$out"/part-*
