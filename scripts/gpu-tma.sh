#!/usr/bin/env bash
# TMA on an H100/H200 (issues 6 and 8), one device call per mode; logs go to $out (gpu-env.sh).
#   check        GPU tests of TMA and descriptors, bench_matmul with TMA (the hand kernel on pointers is
#                cp.async, the one on descriptors TMA), memcheck over a TMA matmul and a descriptor kernel
#   compare      the GPU tests again (no -x), bench_matmul with TINYTON_TMA=0 (all cp.async), tutorial 06
#   views        `@` on operand views (x @ w.T, batched, broadcast) with TMA and without, the descriptor
#                elementwise kernel against pointers, tutorial 06 with TMA on and off (TUTORIAL_S seconds)
#   descriptors  the GPU tests of descriptor accesses, the descriptor elementwise kernels against pointers
set -uo pipefail
cd "$(dirname "$0")/.."
. scripts/gpu-env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/device.txt"
rows="fp16:4096 bf16:4096 fp16:8192 fp16:4096x14336x4096"
case "${1:-check}" in
check)
    timeout 110 python3 -m pytest -q -x -m gpu tests/test_tma.py tests/test_tensor_descriptors.py 2>&1 | tail -25 | tee "$out/pytest.log"
    timeout 60 compute-sanitizer --tool memcheck python3 -m pytest -q -m gpu tests/test_tma.py \
        -k "nan_padding or (array_program and 200x136)" 2>&1 | tail -15 | tee "$out/memcheck.log"
    TINYTON_TMA=1 timeout 200 python3 bench/bench_matmul.py $rows 2>&1 | tee "$out/bench_tma.log" ;;
compare)
    timeout 80 python3 -m pytest -q -m gpu tests/test_tma.py tests/test_tensor_descriptors.py 2>&1 | tail -8 | tee "$out/pytest.log"
    TINYTON_TMA=0 timeout 200 python3 bench/bench_matmul.py $rows 2>&1 | tee "$out/bench_cpasync.log"
    timeout 120 scripts/run-triton-tutorials.sh 06-fused-attention 2>&1 | tail -20 | tee "$out/tutorial06.log" ;;
views)
    timeout 70 python3 -m pytest -q -m gpu tests/test_tma_views.py tests/test_tma.py 2>&1 | tail -12 | tee "$out/pytest.log"
    TINYTON_TMA=1 timeout 70 python3 bench/probes/bench_matmul_views.py 2>&1 | tee "$out/views_tma.log"
    TINYTON_TMA=0 timeout 50 python3 bench/probes/bench_matmul_views.py 2>&1 | tee "$out/views_cpasync.log"
    timeout 30 python3 bench/probes/bench_descriptors.py 2>&1 | tee "$out/descriptors.log"
    left=${TUTORIAL_S:-180}
    TINYTON_TMA=1 timeout $left scripts/run-triton-tutorials.sh --timeout $((left - 5)) 06-fused-attention > "$out/t06_tma.log" 2>&1 &
    TINYTON_TMA=0 TINYTON_CACHE_DIR=/tmp/tt-cache-notma timeout $left scripts/run-triton-tutorials.sh --timeout $((left - 5)) \
        06-fused-attention > "$out/t06_cpasync.log" 2>&1 &
    wait
    tail -30 "$out/t06_tma.log" "$out/t06_cpasync.log" ;;
descriptors)
    timeout 100 python3 -m pytest -q -m gpu tests/test_descriptor_access.py tests/test_tensor_descriptors.py 2>&1 | tail -12 | tee "$out/pytest.log"
    timeout 150 python3 bench/probes/bench_descriptors.py 2>&1 | tee "$out/descriptors.log" ;;
*) echo "usage: scripts/gpu-tma.sh check|compare|views|descriptors" >&2; exit 2 ;;
esac
