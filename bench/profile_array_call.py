import cProfile, pstats, time, torch, sys
sys.path.insert(0, "bench")
from bench_fusion import softmax, rmsnorm
x = torch.randn(32, 2048, device="cuda"); w = torch.randn(2048, device="cuda")
softmax(x); rmsnorm(x, w); torch.cuda.synchronize()
prog = softmax.compile(x)
for label, f in [("softmax(x)", lambda: softmax(x)), ("prog(x)", lambda: prog(x)), ("empty", lambda: torch.empty((32, 2048), device=x.device)),
                 ("launch only", lambda: prog.steps[0].compiled.launcher.launch(prog.steps[0].grid, prog.steps[0].compiled.threads, 0, 0, (x.data_ptr(), x.data_ptr())))]:
    for _ in range(3):
        torch.cuda.synchronize(); t = time.perf_counter()
        for _ in range(5000): f()
        torch.cuda.synchronize(); r = (time.perf_counter() - t) / 5000 * 1e6
    print(f"{label}: {r:.2f} us/call")
pr = cProfile.Profile(); pr.enable()
for _ in range(5000): softmax(x)
pr.disable(); torch.cuda.synchronize()
pstats.Stats(pr).sort_stats("tottime").print_stats(18)
