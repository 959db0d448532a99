"""bench/sanitize.py, compute-sanitizer over the examples and the one-shot benchmarks: reading the tools'
summaries, the kernel filters, the scheduling (with a stand-in sanitizer), and every group on the simulator."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import sanitize

MEMCHECK_REPORT = """========= COMPUTE-SANITIZER
========= Invalid __global__ write of size 4 bytes
=========     at out_of_bounds+0x1d0
=========     by thread (4,0,0) in block (0,0,0)
=========     Address 0x7f3c2a000010 is out of bounds
========= ERROR SUMMARY: 60 errors
"""

STAND_IN = '''#!{python}
"""compute-sanitizer's stand-in: runs the application and prints the tool's summary, counting $FAKE_<TOOL>
problems plus one for a simulator out-of-bounds error (the canary)."""
import os, subprocess, sys
args, tool = sys.argv[1:], "memcheck"
while args[0].startswith("--"):
    tool = args[1] if args[0] == "--tool" else tool
    args = args[2:]
done = subprocess.run(args, capture_output=True, text=True)
print(done.stdout + done.stderr)
n = int(os.environ.get("FAKE_" + tool.upper(), "0")) + ("OutOfBoundsError" in done.stderr)
if tool == "racecheck":
    print(f"========= RACECHECK SUMMARY: {{n}} hazards displayed ({{n}} errors, 0 warnings)")
else:
    print(f"========= ERROR SUMMARY: {{n}} errors")
sys.exit(done.returncode)
'''


def test_summaries_count_errors_and_hazards():
    assert sanitize.problems(MEMCHECK_REPORT) == 60
    assert sanitize.problems("========= ERROR SUMMARY: 0 errors\n") == 0
    assert sanitize.problems("========= RACECHECK SUMMARY: 3 hazards displayed (1 error, 2 warnings)\n") == 3
    assert sanitize.problems("Traceback (most recent call last):\n") is None  # no summary: not clean


def test_torch_and_cublas_kernels_are_excluded_and_tinyton_kernels_are_not():
    assert sanitize.excluded("_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEE")
    assert sanitize.excluded("sm90_xmma_gemm_f64f64_f64f64_f64_nn_n_tilesize64x64x16_execute_kernel")
    for name in ("out_of_bounds", "matmul_kernel", "softmax_0_softmax", "attention_0_attention", "decode_program_3"):
        assert not sanitize.excluded(name)


def test_each_group_runs_first_under_the_first_tool_and_problems_fail_it(tmp_path, monkeypatch):
    stand_in = tmp_path / "bin" / "compute-sanitizer"
    stand_in.parent.mkdir()
    stand_in.write_text(STAND_IN.format(python=sys.executable))
    stand_in.chmod(0o755)
    app = tmp_path / "app.py"
    app.write_text("print('ran')\n")
    monkeypatch.setattr(sanitize, "GROUPS", {"one": [str(app)], "two": [str(app)]})
    env = dict(os.environ, PATH=f"{stand_in.parent}{os.pathsep}{os.environ['PATH']}", TINYTON_BACKEND="sim",
               FAKE_RACECHECK="2")  # fmt: skip
    tools = ["memcheck", "racecheck", "synccheck"]
    runs = sanitize.schedule(tools, ["one", "two"], 4, env, tmp_path, time.perf_counter() + 120)
    order = [(run.tool, run.group) for run in runs]
    assert sorted(order) == sorted([(t, g) for t in tools for g in ("one", "two")] + [("memcheck", "canary")])
    for group in ("one", "two"):
        assert order.index(("memcheck", group)) < min(order.index((t, group)) for t in tools[1:])
    verdicts = {(run.tool, run.group): (run.clean, run.problems) for run in runs}
    assert verdicts[("memcheck", "canary")] == (True, 1)  # the out-of-bounds store was seen
    assert verdicts[("memcheck", "one")] == (True, 0)
    assert verdicts[("synccheck", "two")] == (True, 0)
    assert verdicts[("racecheck", "one")] == (False, 2)
    assert "2 hazards" in next(run for run in runs if run.tool == "racecheck").line()


BENCH_NEEDS = ("torch", "triton")


@pytest.mark.parametrize("group", list(sanitize.GROUPS))
def test_every_group_runs_on_the_simulator(group, tmp_path):
    needs = (BENCH_NEEDS if sanitize.GROUPS[group][0].startswith("bench/bench_") else ()) + (
        ("names",) if "microgpt" in group else ()
    )
    missing = [module for module in needs if importlib.util.find_spec(module) is None]
    if missing:
        pytest.skip(f"the {group} group needs {' and '.join(missing)}")
    env = dict(os.environ, TINYTON_BACKEND="sim")
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "sanitize.py"), "--plain", "--groups", group,
                           "--log-dir", str(tmp_path)], env=env, capture_output=True, text=True, check=False)  # fmt: skip
    logs = "".join(log.read_text()[-3000:] for log in tmp_path.glob("plain-*.log"))
    assert done.returncode == 0, done.stdout + logs
    clean = re.search(r"(\d+)/(\d+) runs clean", done.stdout)
    assert clean and clean[1] == clean[2], done.stdout


def test_a_group_of_gpu_tests_runs_a_process_a_test(tmp_path, monkeypatch):
    """Its tests one process each, side by side (a sanitizer's start and its slow-down per process, not per group)."""
    tests = tmp_path / "test_two.py"
    tests.write_text("import pytest\n\n\n@pytest.mark.gpu\ndef test_a():\n    pass\n\n\n@pytest.mark.gpu\n"
                     "def test_b():\n    pass\n\n\ndef test_not_on_the_gpu():\n    pass\n")  # fmt: skip
    monkeypatch.setattr(sanitize, "GROUPS", {"tests": [*sanitize.PYTEST, tests.name]})
    monkeypatch.setattr(sanitize, "ROOT", tmp_path)  # where the group's commands run
    env = dict(os.environ, TINYTON_BACKEND="sim")
    runs = sanitize.schedule(["plain"], ["tests"], 2, env, tmp_path, time.perf_counter() + 120)
    assert sorted(run.test.split("::")[-1] for run in runs) == ["test_a", "test_b"]
    assert all(run.clean for run in runs), [run.log.read_text() for run in runs]
    assert all(run.line().endswith(run.test.split("::")[-1]) for run in runs)


@pytest.mark.gpu
def test_memcheck_sees_the_canary_through_the_filters(tmp_path):
    if shutil.which("compute-sanitizer") is None:
        pytest.skip("compute-sanitizer is not on PATH")
    env = dict(os.environ, TINYTON_BACKEND="cuda")
    (run,) = sanitize.schedule(["memcheck"], [], 1, env, tmp_path, time.perf_counter() + 300)
    assert run.clean and run.problems, run.log.read_text()[-3000:]
