#!/usr/bin/env bash
# TMA on an H100/H200 (issues 6 and 8): `scripts/gpu-tma.sh check` runs the GPU tests of TMA and descriptors,
# bench_matmul with TMA (the hand kernel on pointers is cp.async, the one on descriptors TMA) and memcheck
# over a TMA matmul and a descriptor kernel; `scripts/gpu-tma.sh compare` runs the GPU tests again (no -x), bench_matmul with
# TINYTON_TMA=0 (everything cp.async) and Triton's tutorial 06. Logs go to $out (gpu-env.sh).
set -uo pipefail
cd "$(dirname "$0")/.."
. scripts/gpu-env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/device.txt"
rows="fp16:4096 bf16:4096 fp16:8192 fp16:4096x14336x4096"
if [ "${1:-check}" = check ]; then
    timeout 110 python3 -m pytest -q -x -m gpu tests/test_tma.py tests/test_tensor_descriptors.py 2>&1 | tail -25 | tee "$out/pytest.log"
    timeout 60 compute-sanitizer --tool memcheck python3 -m pytest -q -m gpu tests/test_tma.py \
        -k "nan_padding or (array_program and 200x136)" 2>&1 | tail -15 | tee "$out/memcheck.log"
    TINYTON_TMA=1 timeout 200 python3 bench/bench_matmul.py $rows 2>&1 | tee "$out/bench_tma.log"
else
    timeout 80 python3 -m pytest -q -m gpu tests/test_tma.py tests/test_tensor_descriptors.py 2>&1 | tail -8 | tee "$out/pytest.log"
    TINYTON_TMA=0 timeout 200 python3 bench/bench_matmul.py $rows 2>&1 | tee "$out/bench_cpasync.log"
    timeout 120 scripts/run-triton-tutorials.sh 06-fused-attention 2>&1 | tail -20 | tee "$out/tutorial06.log"
fi
