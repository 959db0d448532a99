"""Kernels of an array program that start before the one before has completed (programmatic dependent launch,
tinyton/lowering/tt_to_llvm/grid_dependency.py): which parameters a kernel may load before its wait, which
launches overlap the one before, and the results, on the simulator and on the GPU."""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.dialects import func
from xdsl.parser import Parser

import tinyton as tt
from tinyton.compiler import compile_module
from tinyton.compiler.launch_plan import TRIGGER_ENV, Launches, _WrittenApart, overlapping_launches
from tinyton.dialects import tt as ttd
from tinyton.dialects.tt_grid import read_only_params
from tinyton.lowering.tt_to_llvm.grid_dependency import place_grid_dependency
from tinyton.dialects import tinyton_context


@tt.jit
def _project_into_cache(x, g, w, cache, pos):
    """A decode step in small: RMSNorm into a projection whose row goes into the cache, which the next
    kernel reads with the same weights."""
    h = x * (1.0 / tt.sqrt((x * x).mean(axis=-1, keepdims=True) + 1e-5)) * g
    cache[pos] = h @ w
    return (cache @ w).sum(axis=0)


@tt.jit
def _triggered_project_into_cache(x, g, w, cache, pos):
    """The same program compiled apart (the jit keeps one per function): the one the trigger tests compile."""
    return _project_into_cache.fn(x, g, w, cache, pos)


def _inputs(seed: int = 0):
    rng = np.random.default_rng(seed)
    x, g = rng.standard_normal((1, 64)).astype(np.float32), rng.standard_normal(64).astype(np.float32)
    w, cache = rng.standard_normal((64, 64)).astype(np.float32) / 8, rng.standard_normal((16, 64)).astype(np.float32)
    return x, g, w, cache, np.array([5], np.int32)


def _expected(x, g, w, cache, pos):
    cache = cache.copy()
    h = x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + 1e-5) * g
    cache[pos[0]] = (h @ w)[0]
    return (cache @ w).sum(axis=0), cache


def _kernel(module):
    return next(op for op in module.walk() if isinstance(op, func.FuncOp))


def test_weights_are_read_only_and_the_cache_is_not():
    """Only inputs that no launch writes are marked: the weights, not the updated cache, not intermediates."""
    program = _project_into_cache.compile(*_inputs())
    assert program.num_launches >= 2
    marked = set()
    for step in program.steps:
        assert ttd.OVERLAP_ATTR in step.launch.module.attributes
        marked |= {a.name_hint for a in read_only_params(_kernel(step.launch.module))}
    assert {"g", "w"} <= marked
    assert not marked & {"cache", "out0"}


def test_results_on_the_simulator():
    args = _inputs(1)
    want, cache = _expected(*args)
    np.testing.assert_allclose(_project_into_cache(*args), want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(args[3], cache, rtol=1e-5, atol=1e-5)


def test_every_kernel_waits_before_its_first_store():
    """In each kernel's PTX the wait comes before every store and the trigger, and only loads come before it."""
    program = _project_into_cache.compile(*_inputs())
    for step in program.steps:
        ptx = compile_module(step.launch.module, num_warps=step.launch.num_warps, arch="sm_90a",
                             toolchain="llvmlite").asm["ptx"]  # fmt: skip
        assert ptx.count("griddepcontrol.wait;") == 1, step.launch.name
        before = ptx.split("griddepcontrol.wait;")[0]
        assert "st.global" not in before and "atom." not in before and "launch_dependents" not in before


def test_with_the_trigger_each_kernel_lets_the_next_start_after_its_main_loop(monkeypatch):
    """By default (`TINYTON_TRIGGER_DEPENDENTS=1`) a kernel with a loop triggers its dependents once, after the wait
    and after the loop's last step (the backward branch), before its last store; a kernel without a loop does not."""
    monkeypatch.setenv(TRIGGER_ENV, "1")
    program = _triggered_project_into_cache.compile(*_inputs())
    triggered = 0
    for step in program.steps:
        assert ttd.TRIGGER_ATTR in step.launch.module.attributes
        ptx = compile_module(step.launch.module, num_warps=step.launch.num_warps, arch="sm_90a",
                             toolchain="llvmlite").asm["ptx"]  # fmt: skip
        if "launch_dependents" not in ptx:
            continue
        triggered += 1
        assert ptx.count("griddepcontrol.launch_dependents;") == 1
        wait, trigger = ptx.index("griddepcontrol.wait;"), ptx.index("griddepcontrol.launch_dependents;")
        assert wait < ptx.rindex("bra", 0, trigger) < trigger < ptx.rindex("st.global")  # the loop's branch first
    assert triggered >= 1
    np.testing.assert_allclose(program(*_inputs(3)), _expected(*_inputs(3))[0], rtol=1e-4, atol=1e-4)


FILL = """
builtin.module attributes {tt.num_warps = 4 : i32} {
  func.func @fill(%out: !tt.ptr<f32>) {
    %0 = tt.arange 0 to 128 : tensor<128xi32>
    %1 = tt.splat %out : !tt.ptr<f32> -> tensor<128x!tt.ptr<f32>>
    %2 = tt.addptr %1, %0 : tensor<128x!tt.ptr<f32>>, tensor<128xi32>
    %3 = tt.constant 1.0 : f32 -> tensor<128xf32>
    tt.store %2, %3 : tensor<128x!tt.ptr<f32>>, tensor<128xf32>
    func.return
  }
}
"""


def test_a_kernel_that_reads_nothing_early_still_waits():
    """Its wait comes before its first pointer op: each launch completes after the one before it, so the chain of
    waits orders the whole program."""
    module = Parser(tinyton_context(), FILL).parse_module()
    place_grid_dependency(_kernel(module))
    names = [op.name for op in _kernel(module).body.block.ops]
    assert names[:3] == ["tt.arange", "tt.grid_dependency_wait", "tt.splat"]


def test_no_grid_dependency_before_hopper():
    program = _project_into_cache.compile(*_inputs())
    step = program.steps[-1]
    kernel = compile_module(step.launch.module, num_warps=step.launch.num_warps, arch="sm_80", toolchain="llvmlite")
    assert "griddepcontrol" not in kernel.asm["ptx"] and not kernel.waits_for_prior_grid


class _Kernel:
    def __init__(self, overlaps: bool):
        self.overlaps_prior_grid = overlaps


def test_the_first_launch_never_overlaps():
    """What ran before the program is not its business: its first launch waits as every launch used to."""
    kernels = [(_Kernel(True), (1, 1, 1), ()), (_Kernel(True), (1, 1, 1), ()), (_Kernel(False), (1, 1, 1), ())]
    launches = Launches((0,), [((4,), np.dtype(np.float32))], kernels, (0,), False)
    assert overlapping_launches(launches) == [False, True, False]


def test_written_inputs_that_share_memory_with_read_ones_turn_overlap_off():
    specs = [((16,), np.dtype(np.float32)), ((8,), np.dtype(np.float32)), ((4,), np.dtype(np.float64))]
    apart = _WrittenApart(Launches((0, 1, 2), specs, [], (), False, updates=(1,)))
    assert apart((0, 1000, 2000))
    assert not apart((0, 60, 2000))  # the written input's bytes 60..92 meet the first's 0..64
    assert not apart((0, 1000, 990))  # the last's 990..1022 meet the written one
    assert apart((0, 64, 96))  # touching, not sharing


@pytest.mark.gpu
@pytest.mark.parametrize("trigger", [False, True], ids=["waits", "triggers"])
def test_chained_kernels_on_the_gpu(monkeypatch, trigger):
    """Each kernel may start before the one before has completed (with the trigger, as soon as the one before has
    left its main loop); the results, called many times (and replayed from a CUDA graph), stay NumPy's."""
    torch = pytest.importorskip("torch")
    monkeypatch.setenv(TRIGGER_ENV, "1" if trigger else "0")
    args = _inputs(2)
    want, cache = _expected(*args)
    on_gpu = [torch.from_numpy(a).cuda() for a in args]
    program = (_triggered_project_into_cache if trigger else _project_into_cache).compile(*on_gpu)
    if torch.cuda.get_device_capability()[0] >= 9:
        assert [k.overlaps_prior_grid for k in program.kernels()] == [True] * program.num_launches
    fresh = on_gpu[3].clone()
    for _ in range(50):
        on_gpu[3].copy_(fresh)
        got = program(*on_gpu)
    np.testing.assert_allclose(got.cpu().numpy(), want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(on_gpu[3].cpu().numpy(), cache, rtol=1e-5, atol=1e-5)
    graph = torch.cuda.CUDAGraph()
    on_gpu[3].copy_(fresh)
    program(*on_gpu)  # warm: the call path is made outside the capture
    with torch.cuda.graph(graph):
        got = program(*on_gpu)
    for _ in range(20):
        on_gpu[3].copy_(fresh)
        graph.replay()
    torch.cuda.synchronize()
    np.testing.assert_allclose(got.cpu().numpy(), want, rtol=1e-4, atol=1e-4)
