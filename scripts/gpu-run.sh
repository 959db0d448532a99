#!/usr/bin/env bash
# One batched GPU session for the lent-device tool: install the carried wheels, then run the named parts
# (tests, examples, fuzz, bench:NAME...) with logs in $OUT. Usage: scripts/gpu-run.sh tests examples bench:attention
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
        sanitize)  # compute-sanitizer over examples: memcheck on each, racecheck and synccheck on the shared-memory heavy ones
            for e in ${SANITIZE_EXAMPLES:-vector_add softmax fused_softmax matmul flash_attention}; do
                for tool in memcheck ${SANITIZE_TOOLS:-}; do
                    printf '%s %s: ' "$tool" "$e"
                    TINYTON_BACKEND=cuda timeout 120 compute-sanitizer --tool "$tool" --print-limit 5 python3 "examples/$e.py" 2>&1 | grep -E "ERROR SUMMARY|RACECHECK SUMMARY|OK$" | tr '\n' ' '
                    echo
                done
            done | tee "$out/sanitizer.log" ;;
        *) echo "unknown part $part" ;;
    esac
done
