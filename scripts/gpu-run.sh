#!/usr/bin/env bash
# One batched GPU session for the lent-device tool: install the carried wheels, then run the named parts
# (tests, examples, sanitize, bench:NAME..., save-tuning) with logs in $OUT. Usage: scripts/gpu-run.sh tests examples bench:attention
set -uo pipefail
cd "$(dirname "$0")/.."
. scripts/gpu-env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/device.txt"
for part in "$@"; do
    echo "=== $part"
    case $part in
        tests) TINYTON_FUZZ_CASES=0 python3 -m pytest -q -rs -p no:cacheprovider -m gpu tests 2>&1 | tee "$out/pytest-gpu.log" | tail -40 ;;
        examples) for e in examples/*.py; do printf '%s: ' "$e"; TINYTON_BACKEND=cuda timeout 120 python3 "$e" 2>&1 | tail -1; done | tee "$out/examples.log" ;;
        bench:*) (cd bench && timeout "${BENCH_TIMEOUT:-300}" python3 "bench_${part#bench:}.py") 2>&1 | tee "$out/bench_${part#bench:}.md" ;;
        save-tuning) dest=$(cd "$out" && pwd)/tuning.tar.gz; (cd "$TINYTON_CACHE_DIR" && find . -name '*.json' | tar -czf "$dest" -T -) && ls -l "$dest" ;;  # carry back as .gpu/tuning.tar.gz
        sanitize) python3 bench/sanitize.py --log-dir "$out/sanitize" 2>&1 | tee "$out/sanitize.log" | tail -40 ;;  # scripts/sanitize-all.sh
        *) echo "unknown part $part" ;;
    esac
done
