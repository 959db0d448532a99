# Sourced by the GPU scripts (gpu-check.sh, gpu-run.sh, fuzz-gpu.sh) from the project root: install the
# wheels of xDSL & co. carried in .whl (the GPU host has no package index), keep tinyton's cache in /tmp,
# and make the log folder $out ($OUT under the device tool).
out=${OUT:-gpu-out}
mkdir -p "$out"
if [ -d .whl ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl || exit 1
    export PYTHONPATH=/tmp/site:$PWD
fi
export PYTHONUNBUFFERED=1 TINYTON_CACHE_DIR=/tmp/tinyton-cache
# The tuners' candidates compiled in worker processes (tinyton/compiler/compile_pool.py): the host's cores, not one.
export TINYTON_COMPILE_JOBS=${TINYTON_COMPILE_JOBS:-$(nproc)}
# Tuning results of an earlier call (scripts/gpu-run.sh save-tuning, carried back as .gpu/tuning.tar.gz): a
# fresh machine then skips the seconds each matmul, row and attention shape class costs to measure (records
# are keyed by a hash of tinyton's sources: they serve a call on the same commit only).
if [ -f .gpu/tuning.tar.gz ]; then
    mkdir -p "$TINYTON_CACHE_DIR" && tar -xzf .gpu/tuning.tar.gz -C "$TINYTON_CACHE_DIR"
fi
