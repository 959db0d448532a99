#!/usr/bin/env bash
# The differential fuzzer on a GPU (tests/fuzz): CASES random array programs (default 10000) run fused,
# unfused and on the NumPy reference with TINYTON_BACKEND=cuda, one worker process per CPU core (kernel
# compiles dominate: ~7 kernels a case), starting no new slice after LIMIT seconds (default 540, under the
# device tool's 10 minutes). Usage: scripts/fuzz-gpu.sh [CASES] [SEED] [START] [LIMIT]; the log goes to $OUT.
# TINYTON_FUZZ_TILES=drawn draws each product's tiles from the tuner's candidates (tests/fuzz/run.py --tiles).
# Used through the lent-GPU `device` tool with the wheels of xDSL & co. carried in .whl, like gpu-check.sh.
set -uo pipefail
cd "$(dirname "$0")/.."
. scripts/gpu-env.sh
cases=${1:-10000}
seed=${2:-20261123}
start=${3:-0}
limit=${4:-540}
export TINYTON_BACKEND=cuda
export TINYTON_TOOLCHAIN=${TINYTON_TOOLCHAIN:-llvmlite}  # in-process PTX: ~2.5x faster compiles than llc
nvidia-smi --query-gpu=name,driver_version --format=csv | tee "$out/device.txt"
python3 tests/fuzz/run.py --seed "$seed" --start "$start" --cases "$cases" --jobs "${JOBS:-$(nproc)}" \
    --time-limit "$limit" 2>&1 | tee "$out/fuzz-$seed-$start.log" | tail -60
