"""The SASS ptxas makes of a kernel, read without a GPU through `nvdisasm` (on PATH, or the copy Triton's wheel
ships): for checks of what ptxas does with tinyton's PTX, such as where it schedules a wgmma's waits."""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from tinyton.lowering.ptx.toolchain import find_tool


def nvdisasm() -> str | None:
    found = shutil.which("nvdisasm")
    if found:
        return found
    try:
        import triton
    except ImportError:
        return None
    bundled = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "nvdisasm"
    return str(bundled) if bundled.exists() else None


def sass(ptx: str, arch: str = "sm_90a") -> list[str]:
    """The instructions of `ptx`'s kernel as ptxas schedules them, one a line."""
    ptxas, disasm = find_tool("ptxas"), nvdisasm()
    assert ptxas and disasm, "needs ptxas and nvdisasm"
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "k.ptx").write_text(ptx)
        subprocess.run([ptxas, f"-arch={arch}", "k.ptx", "-o", "k.cubin"], cwd=tmp, check=True, capture_output=True)
        text = subprocess.run([disasm, "-c", "k.cubin"], cwd=tmp, check=True, capture_output=True, text=True).stdout
    return [m[1].strip() for m in re.finditer(r"/\*[0-9a-f]{4,}\*/\s+([^;]*);", text)]


HGMMA = re.compile(r"HGMMA\.64x(\d+)x\d+\.\S+ R(\d+),")


def accumulator_reads_before_the_last_wait(instructions: list[str]) -> list[str]:
    """Instructions between a kernel's last wgmma and the wait that retires it (`WARPGROUP.DEPBAR.LE gsb0, 0x0`)
    that read one of its accumulator registers: each reads a value the wgmma may not have written yet."""
    last = max(i for i, ins in enumerate(instructions) if HGMMA.search(ins))
    found = HGMMA.search(instructions[last])
    assert found is not None
    n, base = int(found[1]), int(found[2])
    accumulators = {f"R{r}" for r in range(base, base + n // 2)}  # 64 x N f32 over a warpgroup's 128 threads
    wait = next(i for i in range(last, len(instructions)) if "DEPBAR.LE gsb0, 0x0" in instructions[i])
    reads = []
    for ins in instructions[last + 1:wait]:
        _, _, operands = ins.partition(" ")
        sources = [r.strip() for r in operands.split(",")[1:]]
        if any(re.sub(r"\.reuse$", "", s) in accumulators for s in sources):
            reads.append(ins)
    return reads
