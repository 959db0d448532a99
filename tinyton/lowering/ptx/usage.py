"""Register usage of a PTX kernel as ptxas reports it (`-v`): what Triton's `n_regs` / `n_spills` show,
available without a GPU wherever ptxas is installed."""

from __future__ import annotations

import re
import subprocess

from tinyton.lowering.ptx.toolchain import find_tool


def ptxas_report(ptx: str, arch: str) -> str | None:
    """What `ptxas -v` says of the PTX (registers, spills, and its performance notes such as C7512 or C7514: wgmmas
    serialised); None without ptxas or when it rejects the PTX."""
    ptxas = find_tool("ptxas")
    if ptxas is None:
        return None
    try:
        proc = subprocess.run([ptxas, f"-arch={arch}", "-v", "-", "-o", "/dev/null"], input=ptx.encode(),
                              capture_output=True, check=False)
    except OSError:
        return None
    return proc.stderr.decode(errors="replace") if proc.returncode == 0 else None


def register_usage(ptx: str, arch: str) -> tuple[int, int] | None:
    """(registers per thread, spilled 4-byte registers) of the PTX's kernel; None without ptxas."""
    report = ptxas_report(ptx, arch)
    if report is None or (registers := re.search(r"Used (\d+) registers", report)) is None:
        return None
    spills = re.search(r"(\d+) bytes spill stores", report)
    return int(registers.group(1)), int(spills.group(1)) // 4 if spills else 0
