#!/usr/bin/env bash
# Everything tinyton checks on a GPU host, in one go: the test suite (GPU tests included), every example on
# the GPU, and both benchmark scripts. Logs go to $OUT (or ./gpu-out). Used through the lent-GPU `device`
# tool with the wheels of xDSL & co. carried in .whl (see docs/benchmarks.md; session logs in docs/benchmarks-history.md).
set -uo pipefail
cd "$(dirname "$0")/.."
. scripts/gpu-env.sh
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv | tee "$out/device.txt"
status=0
what=${1:-all}
if [ "$what" = all ] || [ "$what" = tests ]; then
    python3 -m pytest -q -rs tests 2>&1 | tee "$out/pytest.log" | tail -25 || status=1
    for example in examples/*.py; do
        printf '%s: ' "$example"
        TINYTON_BACKEND=cuda python3 "$example" 2>&1 | tail -1 || status=1
    done | tee "$out/examples.log"
fi
if [ "$what" = all ] || [ "$what" = bench ]; then
    (cd bench && python3 bench_kernels.py) 2>&1 | tee "$out/bench_kernels.md" || status=1
    (cd bench && python3 bench_fusion.py) 2>&1 | tee "$out/bench_fusion.md" || status=1
fi
exit $status
