#!/usr/bin/env bash
# compute-sanitizer over every tinyton kernel of the examples and the benchmarks (bench/sanitize.py): memcheck,
# then racecheck and synccheck, on the examples at small sizes and the benchmark scripts in one-shot mode.
# Arguments go to bench/sanitize.py (e.g. --tools memcheck,racecheck,synccheck,initcheck --groups matmul).
# Logs go to $OUT/sanitize. Used through the lent-GPU device tool with the wheels carried in .whl, like
# gpu-check.sh; microgpt's groups need the `names` package (its wheel in .whl).
set -uo pipefail
cd "$(dirname "$0")/.."
. scripts/gpu-env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/device.txt"
compute-sanitizer --version | tail -1 | tee -a "$out/device.txt"
python3 bench/sanitize.py --log-dir "$out/sanitize" "$@" 2>&1 | tee "$out/sanitize.log"
exit "${PIPESTATUS[0]}"
