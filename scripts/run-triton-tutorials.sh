#!/usr/bin/env bash
# Triton's tutorials (01, 02, 03, 05, 06 from the git-ignored .tutorials/) on tinyton, imports changed only:
# OK/FAIL per tutorial (scripts/run_triton_tutorials.py says how). Arguments go to it, e.g. --size small 06-fused-attention.
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
exec python3 scripts/run_triton_tutorials.py "$@"
