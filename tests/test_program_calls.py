"""The call fast path of array programs (tinyton/frontend/programs.py `ProgramCalls`) and their generated
launch plans (tinyton/compiler/launch_plan.py): a call never runs a stale program, whatever changed
(shape, dtype, strides, scalar values and types, globals, closures, the inputs' memory)."""

from __future__ import annotations

import numpy as np
import pytest
from standin_gpu import standin_gpu

import tinyton as tt
from tinyton.frontend import programs
from tinyton.frontend.arguments import classifier
from tinyton.frontend.options import LAUNCH_OPTIONS
from tinyton.runtime import driver
from tinyton.runtime.launch import Launcher
from tinyton.runtime.memory import device_input

SCALE = 2.0


@pytest.fixture(autouse=True)
def simulator(monkeypatch):
    monkeypatch.setattr(driver, "is_available", lambda: False)
    monkeypatch.setattr(driver, "backend", lambda: "sim")


def softmax_np(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


@tt.jit
def scaled_softmax(x, scale):
    e = tt.exp(x * scale - tt.max(x * scale, axis=-1, keepdims=True))
    return e / tt.sum(e, axis=-1, keepdims=True)


@tt.jit
def uses_global(x):
    return x * SCALE


@tt.jit
def softmax_colsum(x):
    e = tt.exp(x - tt.max(x, axis=-1, keepdims=True))
    return (e / tt.sum(e, axis=-1, keepdims=True)).sum(axis=0)


def compiles(monkeypatch) -> list:
    """Records every program compile_array_program builds (a call that misses the fast path and the cache)."""
    built: list = []
    real = programs.build_program

    def build(*args, **kwargs):
        built.append(args[1])
        return real(*args, **kwargs)

    monkeypatch.setattr(programs, "build_program", build)
    return built


def test_shapes_dtypes_strides_and_scalars_never_hit_a_stale_program(monkeypatch) -> None:
    built = compiles(monkeypatch)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 16)).astype(np.float32)
    calls = [
        (x, 1.0),
        (x, 1.0),  # a hit
        (x, 0.5),  # another scalar value: baked into the trace
        (x, 1),  # an int, not a float: another program (1 == 1.0 as a dict key)
        (x[:, :8], 1.0),  # another shape
        (x.astype(np.float16), 1.0),  # another dtype
        (np.asfortranarray(x), 1.0),  # other strides: same program, made contiguous
        (x[:, ::2], 1.0),  # a strided view, same shape as x[:, :8]
        (x, 1.0),  # back to the first
    ]
    for args in calls:
        result = scaled_softmax(*args)
        expected = softmax_np(np.asarray(args[0], np.float64) * args[1])
        np.testing.assert_allclose(result, expected, rtol=2e-3 if args[0].dtype == np.float16 else 1e-5, atol=1e-6)
        assert result.dtype == args[0].dtype
    assert len(built) == 5  # (x, 1.0), (x, 0.5), (x, 1), the (4, 8) shape, float16


def test_globals_closures_and_types(monkeypatch) -> None:
    global SCALE
    built = compiles(monkeypatch)
    x = np.arange(8, dtype=np.float32)
    try:
        np.testing.assert_allclose(uses_global(x), x * 2.0)
        SCALE = 3.0
        np.testing.assert_allclose(uses_global(x), x * 3.0)
        SCALE = 3.0 + 0.0  # rebound to an equal value: no new program
        np.testing.assert_allclose(uses_global(x), x * 3.0)
    finally:
        SCALE = 2.0
    assert len(built) == 2

    factor = 4.0

    @tt.jit
    def closure(x):
        return x * factor

    np.testing.assert_allclose(closure(x), x * 4.0)
    factor = 5.0
    np.testing.assert_allclose(closure(x), x * 5.0)
    np.testing.assert_allclose(closure(x.astype(np.int32)), x * 5.0)  # int32 * 5.0 promotes to float
    np.testing.assert_allclose(closure(True * np.ones(2, np.float32)), [5.0, 5.0])


def test_keywords_and_unhashable_arguments_take_the_slow_path() -> None:
    @tt.jit
    def shift(x, by=(1.0,)):
        return x + by[0]

    x = np.zeros(3, np.float32)
    np.testing.assert_allclose(shift(x), [1, 1, 1])
    np.testing.assert_allclose(shift(x, by=[2.0]), [2, 2, 2])  # a list: unhashable, keyed by repr
    np.testing.assert_allclose(shift(x, by=[3.0]), [3, 3, 3])
    np.testing.assert_allclose(shift(x, (4.0,)), [4, 4, 4])


def test_host_and_device_memory_get_their_own_runners() -> None:
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(1).standard_normal((4, 16)).astype(np.float32)
    assert isinstance(scaled_softmax(x, 1.0), np.ndarray)
    assert isinstance(scaled_softmax(torch.from_numpy(x), 1.0), torch.Tensor)  # same shape and dtype
    assert isinstance(scaled_softmax(x, 1.0), np.ndarray)
    t = torch.from_numpy(x)
    with standin_gpu(scaled_softmax, record=True) as launches:
        y = scaled_softmax(t, 1.0)  # "device" memory now: the generated runner, torch's allocator
        assert isinstance(y, torch.Tensor) and y.shape == t.shape
        assert [values for _, _, values in launches] == [(t.data_ptr(), y.data_ptr())]


def test_generated_runner_two_launches_and_alignment() -> None:
    torch = pytest.importorskip("torch")
    x = torch.randn(32, 2048)
    with standin_gpu(softmax_colsum, record=True) as launches:
        y = softmax_colsum(x)
        assert y.shape == (2048,) and y.dtype == torch.float32
        (first, _, (px, pe)), (second, _, (pe2, py)) = launches
        assert first.endswith("softmax") and second.endswith("reduction")
        assert px == x.data_ptr() and pe == pe2 and py == y.data_ptr() and pe % 16 == 0
        source = softmax_colsum.compile(x).runner((x,)).source
        assert source.count(".new_empty(") == 1 and source.count("SCRATCH(s, ") == 1  # output, intermediates
        assert "for " not in source

        launches.clear()
        flat = torch.randn(32 * 2048 + 1)
        misaligned = flat[1:].view(32, 2048)  # contiguous, 4 bytes past an aligned address
        softmax_colsum(misaligned)
        assert launches[0][2][0] % 16 == 0 and launches[0][2][0] != misaligned.data_ptr()  # an aligned copy

        launches.clear()
        softmax_colsum(x.t().contiguous().t())  # strided: made contiguous
        assert launches[0][2][0] != x.data_ptr()


@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_host_inputs_past_an_aligned_address_run_on_the_simulator(kind: str) -> None:
    """`f(x[1:])`: the kernels assume 16-byte-aligned buffers, so a host view 4 bytes in is copied first (it
    was refused as 'specialised as 16-byte aligned' - the torch backend fell back on `idx[:, -block:]`)."""
    flat = np.arange(65, dtype=np.float32)
    view = flat[1:] if kind == "numpy" else pytest.importorskip("torch").from_numpy(flat)[1:]

    @tt.jit
    def shifted_exp(x):
        return tt.exp(x) + 1

    np.testing.assert_allclose(np.asarray(shifted_exp(view)), np.exp(flat[1:]) + 1, rtol=1e-6)
    assert np.asarray(shifted_exp(flat[:64])).shape == (64,)  # the aligned call shares the program


def test_device_input_refuses_strided_foreign_arrays() -> None:
    class Foreign:
        def __init__(self, strides: tuple[int, int]):
            self.__cuda_array_interface__ = {"shape": (4, 4), "typestr": "<f4", "data": (1 << 32, False),
                                             "strides": strides, "version": 3}

    with pytest.raises(ValueError, match="strides"):
        device_input(Foreign((4, 16)))
    assert device_input(Foreign((16, 4)))[1] == 1 << 32


def test_kernel_launch_stages_cpu_tensors() -> None:
    """A CPU torch tensor passed to kernel[grid] on a GPU is staged (slow path), never launched by address."""
    torch = pytest.importorskip("torch")

    @tt.jit
    def copy(src, dst, n, BLOCK: tt.constexpr):
        offsets = tt.arange(0, BLOCK)
        tt.store(dst + offsets, tt.load(src + offsets, mask=offsets < n), mask=offsets < n)

    a, b = torch.zeros(16), torch.zeros(16)
    classify = classifier(copy.params, [type(a), type(b), int], {"BLOCK": int}, LAUNCH_OPTIONS).classify
    _, values = classify((a, b, 16), {"BLOCK": 16})
    assert values == (None, None, 16)


def test_a_hits_own_error_propagates(monkeypatch) -> None:
    """An error raised while a fast-path hit runs (here the launch) reaches the caller as raised: never
    taken for a miss, retried through the slow path or recompiled (a ValueError, like a guard's, included)."""
    torch = pytest.importorskip("torch")
    t = torch.from_numpy(np.random.default_rng(2).standard_normal((4, 16)).astype(np.float32))
    failing: list[str] = []
    real_bind = Launcher.bind

    def bind(self, *args, **options):
        launch = real_bind(self, *args, **options)

        def failing_launch(stream, values):
            if failing:
                raise ValueError(failing[0])
            return launch(stream, values)

        return failing_launch

    monkeypatch.setattr(Launcher, "bind", bind)
    with standin_gpu(scaled_softmax):
        scaled_softmax(t, 1.0)  # the miss: compiles, fills the table
        scaled_softmax(t, 1.0)  # a hit
        built, misses = compiles(monkeypatch), []
        real_miss = programs.ProgramCalls._miss
        monkeypatch.setattr(programs.ProgramCalls, "_miss", lambda self, args: misses.append(args) or real_miss(self, args))
        failing.append("launch failed in the user's call")
        with pytest.raises(ValueError, match="launch failed in the user's call"):
            scaled_softmax(t, 1.0)
        assert (built, misses) == ([], [])
