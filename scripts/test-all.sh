#!/usr/bin/env bash
# Install everything tinyton needs (LLVM/MLIR 22 from the OS packages when run as root), then run the
# whole test suite: pytest, the lit/FileCheck tests and every example. Exits non-zero when anything fails.
set -euo pipefail
cd "$(dirname "$0")/.."

llvm_bin=/usr/lib/llvm-22/bin
if [ ! -x "$llvm_bin/mlir-translate" ] || [ ! -x "$llvm_bin/llc" ]; then
    if [ "$(id -u)" = 0 ]; then
        apt-get update && apt-get install -y mlir-22-tools llvm-22
    else
        echo "warning: $llvm_bin has no mlir-translate/llc; run as root to install mlir-22-tools llvm-22" >&2
    fi
fi

python3 -m venv .venv
. .venv/bin/activate
python -m pip install -q --upgrade pip
python -m pip install -q --no-cache-dir -e '.[test]'  # torch among them: the torch backend's CPU tests and examples/torch_nanogpt.py

# ptxas checks every generated kernel; take it from the CUDA toolkit, else from NVIDIA's pip package.
if ! command -v ptxas >/dev/null; then
    python -m pip install -q --no-cache-dir nvidia-cuda-nvcc-cu12
    export PATH="$PATH:$(python -c 'import nvidia.cuda_nvcc, os; print(os.path.join(os.path.dirname(nvidia.cuda_nvcc.__file__), "bin"))')"
fi

export TINYTON_CACHE_DIR="${TINYTON_CACHE_DIR:-$(mktemp -d)}"
python -m pytest -q -rs tests
lit -v tests/filecheck
for example in examples/*.py; do
    echo "== $example"
    python "$example"
done
