"""Target naming and external-tool plumbing shared by both PTX paths."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

TRIPLE = "nvptx64-nvidia-cuda"
SHORT_POINTERS = "-nvptx-short-ptr"
"""Both paths give shared-memory pointers 32 bits (`p3:32:32`, as Triton does): the shared window is 32 bits wide,
and 64-bit addresses of a kernel's shared tiles, hoisted out of its loops, held two registers each (the attention
backward's dk/dv kernel spilled 52 registers at D = 128 for them, sm_90a). The option makes the target's code agree;
the module says it in its data layout (`DATA_LAYOUT`), which `opt` takes from the module, not from the option."""
DATA_LAYOUT = "e-p3:32:32-p4:32:32-p5:32:32-p6:32:32-p7:32:32-i64:64-i128:128-i256:256-v16:16-v32:32-n16:32:64"
"""NVPTX's 64-bit data layout with the short pointers of `SHORT_POINTERS` (LLVM 22's, as llvmlite's target gives it)."""
LLVM_BIN = Path(os.environ.get("TINYTON_LLVM_BIN", "/usr/lib/llvm-22/bin"))

# Smallest PTX ISA that knows each architecture; PTX 8.0 covers everything up to sm_90a.
_MIN_PTX_VERSION = {100: 86, 101: 86, 103: 88, 110: 90, 120: 87, 121: 88}


class ToolchainError(RuntimeError):
    """A compilation step failed; the message carries the tool's diagnostics."""


def parse_arch(arch: str) -> int:
    """`"sm_90a"` -> 90; rejects anything that is not an `sm_NN[a|f]` name."""
    m = re.fullmatch(r"sm_(\d+)[af]?", arch)
    if m is None:
        raise ToolchainError(f"unsupported architecture {arch!r}, expected e.g. 'sm_90'")
    return int(m.group(1))


def ptx_features(arch: str) -> str:
    """The `-mattr` string selecting the PTX ISA version to emit for `arch`."""
    return f"+ptx{max(80, _MIN_PTX_VERSION.get(parse_arch(arch), 80))}"


def find_tool(name: str) -> str | None:
    """Path of an LLVM/CUDA tool: `LLVM_BIN` first, then `PATH`."""
    candidate = LLVM_BIN / name
    if os.access(candidate, os.X_OK):
        return str(candidate)
    return shutil.which(name)


def run_tool(argv: Sequence[str], stdin: str | bytes = b"") -> bytes:
    """Run one tool, raising `ToolchainError` with its stderr when it fails."""
    data = stdin.encode() if isinstance(stdin, str) else stdin
    proc = subprocess.run(argv, input=data, capture_output=True, check=False)
    if proc.returncode != 0:
        raise ToolchainError(
            f"{Path(argv[0]).name} failed (exit {proc.returncode}): "
            f"{' '.join(argv[1:])}\n{proc.stderr.decode(errors='replace')}"
        )
    return proc.stdout
