#!/usr/bin/env bash
# Host overhead of launches and array-program calls (issue 10 points 4 and 5), one device call: the GPU tests of
# the call paths, bench/host_overhead.py twice (and once on MAIN_TREE, the tree to compare with, when given),
# bench/import_time.py; logs go to $out (gpu-env.sh).
#   scripts/gpu-host.sh [MAIN_TREE]
set -uo pipefail
cd "$(dirname "$0")/.."
main_tree=${1:-}
. scripts/gpu-env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/device.txt"
python3 -m compileall -q tinyton /tmp/site > /dev/null 2>&1
timeout 150 python3 -m pytest -q -m gpu tests/test_runtime_gpu.py tests/test_program_calls_gpu.py \
    tests/test_streams_graphs.py tests/test_scratch.py tests/test_program_calls.py tests/test_jit.py \
    tests/test_launcher.py tests/test_grid_split.py 2>&1 | tail -15 | tee "$out/pytest.log"
timeout 60 python3 bench/host_overhead.py 2>&1 | tee "$out/host_overhead_1.md"
if [ -n "$main_tree" ]; then
    (cd "$main_tree/bench" && PYTHONPATH=/tmp/site:$main_tree timeout 60 python3 host_overhead.py 2>&1) | tee "$out/host_overhead_main.md"
fi
timeout 60 python3 bench/host_overhead.py 2>&1 | tee "$out/host_overhead_2.md"
timeout 60 python3 bench/import_time.py --runs 8 2>&1 | tee "$out/import_time.md"
