#!/usr/bin/env bash
# Descriptor loads/stores outside dot loops (branch tma3) on an H100/H200, one call: the GPU tests of
# descriptors (vectorised accesses on a unit last stride, strided views), then the descriptor elementwise
# kernels against pointers and torch. Logs under $out.
set -uo pipefail
cd "$(dirname "$0")/.."
. scripts/gpu-env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/device.txt"
timeout 100 python3 -m pytest -q -m gpu tests/test_descriptor_access.py tests/test_tensor_descriptors.py 2>&1 | tail -12 | tee "$out/pytest.log"
timeout 150 python3 bench/bench_descriptors.py 2>&1 | tee "$out/descriptors.log"
