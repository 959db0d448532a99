import statistics, sys, torch
sys.path.insert(0, "bench")
import tinyton.lowering.fusion.geometry as geometry
from bench_fusion import rmsnorm, softmax, torch_rmsnorm
from common import median_ms, gbps
from tinyton.runtime import program as programs
x = torch.randn(4096, 4096, device="cuda"); w = torch.randn(4096, device="cuda")
tc = torch.compile(torch_rmsnorm); tc(x, w)
base = geometry.warps_for
for rep in range(3):
    row = [f"tc {gbps(2*x.nbytes, median_ms(lambda: tc(x, w))):.0f}"]
    for warps in (4, 8, 16):
        geometry.warps_for = lambda e, w_=warps: w_
        programs._PROGRAMS.clear(); rmsnorm(x, w)
        row.append(f"rms{warps} {gbps(2*x.nbytes, median_ms(lambda: rmsnorm(x, w))):.0f}")
        programs._PROGRAMS.clear(); softmax(x)
        row.append(f"sm{warps} {gbps(2*x.nbytes, median_ms(lambda: softmax(x))):.0f}")
    print(" | ".join(row), flush=True)
