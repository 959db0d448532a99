#!/usr/bin/env bash
# One batched GPU session for the lent-device tool: install the carried wheels, then run the named parts
# (tests, tests:FILES, shard:I/N, examples, sanitize[:GROUPS[=TOOLS]], fuzz, bench:NAME[=ARGS], probe:NAME[=ARGS], save-tuning) with every
# part's whole log in $OUT, so that a summary line never depends on the tool's output tail. Usage:
#   scripts/gpu-run.sh tests:tests/test_llama.py,tests/test_grid_dependency.py "bench:llm=--models llama-3.2-1b --batches 1" fuzz
set -uo pipefail
cd "$(dirname "$0")/.."
. scripts/gpu-env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/device.txt"
# pytest-xdist, when carried (fetch-wheels.sh pytest-xdist execnet), spreads the tests over the host's cores: the
# GPU tests' time is mostly compiling on the CPU. Each worker's tuners then compile in 2 processes, not the host's
# cores each; the benchmarks keep them all (gpu-env.sh). The tests keep a cache of their own: what their tuners
# measure while a dozen workers load the host must not become a later benchmark's choice of tiles.
tests_cache=$TINYTON_CACHE_DIR-tests
parallel=() test_compile_jobs=$TINYTON_COMPILE_JOBS
if python3 -c "import xdist" 2>/dev/null; then
    parallel=(-n "${TEST_JOBS:-12}") test_compile_jobs=2
fi
for part in "$@"; do
    echo "=== $part"
    case $part in
        tests) TINYTON_FUZZ_CASES=0 TINYTON_CACHE_DIR=$tests_cache TINYTON_COMPILE_JOBS=$test_compile_jobs timeout "${TESTS_TIMEOUT:-540}" python3 -m pytest -q -rs -p no:cacheprovider "${parallel[@]}" \
                   -m gpu tests 2>&1 | tee "$out/pytest-gpu.log" | tail -40 ;;
        tests:*|shard:*)
            # tests:F1,F2 (globs allowed) or shard:I/N, the I-th of N round-robin shares of the test files (0 <= I < N)
            if [ "${part%%:*}" = shard ]; then
                share=${part#shard:}; files=$(ls tests/test_*.py | awk -v i="${share%/*}" -v n="${share#*/}" 'NR % n == i' | paste -sd,)
            else
                files=${part#tests:}
            fi
            # shellcheck disable=SC2086  # the files split into words on purpose
            # -v: each result on a line of its own as it comes, so a part cut by its timeout still names its failures
            TINYTON_CACHE_DIR=$tests_cache TINYTON_COMPILE_JOBS=$test_compile_jobs timeout "${TESTS_TIMEOUT:-400}" python3 -m pytest -v -rs -p no:cacheprovider "${parallel[@]}" -m gpu ${files//,/ } 2>&1 \
                | tee "$out/pytest-gpu-part.log" | grep -E " passed| failed|FAILED|Error" | tail -20 ;;
        fuzz) TINYTON_FUZZ_TILES=${TINYTON_FUZZ_TILES:-drawn} bash scripts/fuzz-gpu.sh "${FUZZ_CASES:-10000}" "${FUZZ_SEED:-20261123}" 0 "${FUZZ_LIMIT:-300}" | tail -8 ;;
        examples) for e in examples/*.py; do printf '%s: ' "$e"; TINYTON_BACKEND=cuda timeout 120 python3 "$e" 2>&1 | tail -1; done | tee "$out/examples.log" ;;
        bench:*|probe:*)
            spec=${part#*:}; name=${spec%%=*}; args=""; [ "$spec" != "$name" ] && args=${spec#*=}
            script=bench_$name.py; [ "${part%%:*}" = probe ] && script=probes/$name.py
            # shellcheck disable=SC2086  # ARGS split into words on purpose
            # the whole log (the tuners' choices too) in $OUT; their lines left out of what the tail shows
            (cd bench && timeout "${BENCH_TIMEOUT:-300}" python3 "$script" $args) 2>&1 | tee "$out/${part%%:*}_$name.md" \
                | grep -v "^tinyton: " | tail -25 ;;
        save-tuning) dest=$(cd "$out" && pwd)/tuning.tar.gz; (cd "$TINYTON_CACHE_DIR" && find . -name '*.json' | tar -czf "$dest" -T -) && ls -l "$dest" ;;  # carry back as .gpu/tuning.tar.gz
        sanitize|sanitize:*)  # sanitize:GROUPS[=TOOLS], comma-separated (bench/sanitize.py's); scripts/sanitize-all.sh
            spec=${part#sanitize}; spec=${spec#:}; options=()
            [ -n "$spec" ] && options=(--groups "${spec%%=*}")
            [ "$spec" != "${spec#*=}" ] && options+=(--tools "${spec#*=}")
            python3 bench/sanitize.py --log-dir "$out/sanitize" --time-limit "${SANITIZE_LIMIT:-540}" "${options[@]}" 2>&1 | tee "$out/sanitize.log" | tail -40 ;;
        *) echo "unknown part $part" ;;
    esac
done
