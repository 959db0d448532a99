#!/usr/bin/env bash
# TMA on operand views and descriptor kernels (branch tma2) on an H100/H200, one call: the GPU tests of TMA,
# the array program's @ on views with TMA and with TINYTON_TMA=0, the descriptor elementwise kernel against
# pointers, then Triton's tutorial 06 with TMA on and off (in parallel, correctness only). Logs under $out.
set -uo pipefail
cd "$(dirname "$0")/.."
. scripts/gpu-env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/device.txt"
timeout 70 python3 -m pytest -q -m gpu tests/test_tma_views.py tests/test_tma.py 2>&1 | tail -12 | tee "$out/pytest.log"
TINYTON_TMA=1 timeout 70 python3 bench/bench_matmul_views.py 2>&1 | tee "$out/views_tma.log"
TINYTON_TMA=0 timeout 50 python3 bench/bench_matmul_views.py 2>&1 | tee "$out/views_cpasync.log"
timeout 30 python3 bench/bench_descriptors.py 2>&1 | tee "$out/descriptors.log"
left=$(( ${TUTORIAL_S:-180} ))
TINYTON_TMA=1 timeout $left scripts/run-triton-tutorials.sh --timeout $((left - 5)) 06-fused-attention > "$out/t06_tma.log" 2>&1 &
TINYTON_TMA=0 TINYTON_CACHE_DIR=/tmp/tt-cache-notma timeout $left scripts/run-triton-tutorials.sh --timeout $((left - 5)) 06-fused-attention > "$out/t06_cpasync.log" 2>&1 &
wait
tail -30 "$out/t06_tma.log" "$out/t06_cpasync.log"
