"""Triton's host API on tinyton: launch options, the kernel handle a launch returns, warmup, jit options,
autotune / Config / heuristics, driver.active and tinyton.testing."""

from __future__ import annotations

import numpy as np
import pytest

import tinyton as triton
import tinyton.language as tl
from tinyton.runtime import cache as cache_module
from tinyton.runtime.driver import backend


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


def arrays(n=100):
    x = np.arange(n, dtype=np.float32)
    return x, 2 * x, np.zeros_like(x)


def test_launch_options_are_accepted_and_the_launch_returns_the_kernel():
    x, y, out = arrays()
    handle = add_kernel[(4,)](x, y, out, 100, BLOCK=32, num_warps=2, num_stages=4, num_ctas=2, maxnreg=128)
    np.testing.assert_array_equal(out, 3 * x)
    assert handle.name == "add_kernel"
    assert handle.metadata.num_warps == 2 and handle.metadata.num_stages == 4 and handle.metadata.shared >= 0
    assert "tt.num_stages = 4" in handle.asm["ttir"] and ".entry add_kernel" in handle.asm["ptx"]
    assert handle.n_regs > 0 and handle.n_spills >= 0
    with pytest.raises(ValueError, match="num_stages must be an int"):
        add_kernel[(4,)](x, y, out, 100, BLOCK=32, num_stages=-1)


def test_warmup_compiles_without_launching():
    x, y, out = arrays()
    handle = add_kernel.warmup(x, y, out, 100, BLOCK=64, grid=(2,))
    handle._init_handles()
    assert not out.any() and handle.name == "add_kernel"
    assert add_kernel.fn.__name__ == "add_kernel" and add_kernel.__name__ == "add_kernel"


@triton.jit
def staged_copy(src, dst, n, BLOCK: tl.constexpr, num_stages: tl.constexpr):
    for start in tl.range(0, n, BLOCK, num_stages=num_stages):
        offs = start + tl.arange(0, BLOCK)
        tl.store(dst + offs, tl.load(src + offs, mask=offs < n), mask=offs < n)


def test_a_parameter_named_like_a_launch_option_takes_the_keyword_too():
    x, _, out = arrays()
    handle = staged_copy[(1,)](x, out, 100, BLOCK=32, num_stages=3)
    np.testing.assert_array_equal(out, x)
    assert handle.metadata.num_stages == 3 and "tt.num_stages = 3" in handle.asm["ttir"]


def test_a_warmup_result_launches_with_every_argument():
    x, _, out = arrays()
    compiled = staged_copy.warmup(x, out, 100, BLOCK=32, num_stages=2, grid=(1,))
    assert not out.any()
    compiled[(1, 1, 1)](x, out, 100, 32, 2)
    np.testing.assert_array_equal(out, x)
    with pytest.raises(TypeError, match="takes 5 argument"):
        compiled[(1,)](x, out, 100)


def test_grid_lambda_sees_meta_parameters_and_options():
    seen = {}

    def grid(meta):
        seen.update(meta)
        return (triton.cdiv(meta["n"], meta["BLOCK"]),)

    x, y, out = arrays()
    add_kernel[grid](x, y, out, 100, BLOCK=16, num_warps=8)
    np.testing.assert_array_equal(out, 3 * x)
    assert seen["BLOCK"] == 16 and seen["num_warps"] == 8 and seen["n"] == 100


@triton.jit(do_not_specialize=["n"], debug=True)
def copy_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def test_jit_options():
    x, _, out = arrays(32)
    copy_kernel[(1,)](x, out, 32, BLOCK=32)
    np.testing.assert_array_equal(out, x)
    assert copy_kernel.debug is True and copy_kernel.do_not_specialize == {"n"}
    text = copy_kernel.compile(x, out, 32, BLOCK=32).asm["tt"]
    assert "%n: i32)" in text  # no tt.divisibility on n although 32 % 16 == 0
    with pytest.raises(ValueError, match="do_not_specialize"):
        triton.jit(do_not_specialize=["missing"])(copy_kernel.fn)


# ---- autotune ---------------------------------------------------------------------------------


@triton.autotune(
    configs=[triton.Config({"BLOCK": 32}, num_warps=1), triton.Config({"BLOCK": 64}, num_warps=2)],
    key=["n"],
    reset_to_zero=["out_ptr"],
)
@triton.jit
def tuned_add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


def test_autotune_picks_a_config_and_grid_lambdas_see_it(tmp_path, monkeypatch):
    monkeypatch.setattr(cache_module, "default_cache", lambda: cache_module.KernelCache(tmp_path))
    x, y, out = arrays()
    blocks = []
    tuned_add[lambda meta: (blocks.append(meta["BLOCK"]) or triton.cdiv(meta["n"], meta["BLOCK"]),)](x, y, out, 100)
    np.testing.assert_array_equal(out, 3 * x)
    assert tuned_add.best_config is not None and blocks[-1] == tuned_add.best_config.kwargs["BLOCK"]
    if backend() == "sim":
        assert tuned_add.best_config.kwargs["BLOCK"] == 32  # the simulator takes the first config
    with pytest.raises(ValueError, match="conflicting meta-parameters BLOCK"):
        tuned_add[(1,)](x, y, out, 100, BLOCK=16)


def test_autotune_result_is_remembered_on_disk(tmp_path):
    store = cache_module.KernelCache(tmp_path)
    store.put_record("autotune", "k", 1)
    assert cache_module.KernelCache(tmp_path).get_record("autotune", "k") == 1


def test_prune_configs_by():
    configs = [triton.Config({"BLOCK": b}) for b in (16, 32, 64, 128)]
    tuner = triton.autotune(
        configs, key=["n"],
        prune_configs_by={"early_config_prune": lambda cs, named, **kw: [c for c in cs if c.kwargs["BLOCK"] >= 32],
                          "perf_model": lambda **kw: -kw["BLOCK"], "top_k": 2},
    )(add_kernel)
    kept = tuner.prune({"n": 100}, {})
    assert [c.kwargs["BLOCK"] for c in kept] == [128, 64]


@triton.heuristics({"BLOCK": lambda args: triton.next_power_of_2(args["n"])})
@triton.jit
def heuristic_copy(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def test_heuristics_compute_meta_parameters():
    x, _, out = arrays(20)
    handle = heuristic_copy[(1,)](x, out, 20)
    np.testing.assert_array_equal(out, x)
    assert "tensor<32xi32>" in handle.asm["tt"]


# ---- driver and testing -----------------------------------------------------------------------


def test_driver_active():
    active = triton.runtime.driver.active
    device = active.get_current_device()
    props = active.utils.get_device_properties(device)
    assert {"multiprocessor_count", "max_shared_mem", "max_num_regs", "warpSize"} <= set(props)
    assert props["warpSize"] == 32 and isinstance(active.get_current_stream(), int)
    assert active.get_current_target().backend == "cuda"


@pytest.mark.gpu
def test_driver_properties_on_gpu():
    """The device's own figures (tutorial 02 sizes its grid from them); the index argument shadowed `device`."""
    test_driver_active()
    props = triton.runtime.driver.active.utils.get_device_properties(0)
    assert props["multiprocessor_count"] > 0 and props["max_shared_mem"] >= 48 * 1024


def test_do_bench_and_assert_close():
    from tinyton import testing

    x, y, out = arrays()
    ms = testing.do_bench(lambda: add_kernel[(4,)](x, y, out, 100, BLOCK=32), warmup=1, rep=5)
    assert ms > 0
    q = testing.do_bench(lambda: None, warmup=1, rep=2, quantiles=[0.5, 0.2, 0.8])
    assert len(q) == 3
    testing.assert_close(out, 3 * x)
    with pytest.raises(AssertionError):
        testing.assert_close(out, 3 * x + 1)


def test_perf_report_prints_a_table(capsys):
    from tinyton import testing

    @testing.perf_report(
        testing.Benchmark(x_names=["size"], x_vals=[1, 2], line_arg="provider", line_vals=["a", "b"],
                          line_names=["A", "B"], plot_name="demo", args={"scale": 10})
    )
    def bench(size, provider, scale):
        return size * scale if provider == "a" else (size, 0, 0)

    table = bench.run(print_data=True, return_df=True)
    assert table == {"size": [1, 2], "A": [10, 20], "B": [1, 2]}
    assert "demo:" in capsys.readouterr().out


def test_benchmarks_are_skipped_under_tinyton_skip_benchmarks(capsys, monkeypatch):
    calls = []

    @triton.testing.perf_report(triton.testing.Benchmark(x_names=["n"], x_vals=[1], line_arg="p", line_vals=["a"], line_names=["A"], plot_name="skipped", args={}))
    def bench(n, p):
        calls.append(n)
        return 1.0

    monkeypatch.setenv("TINYTON_SKIP_BENCHMARKS", "1")
    assert bench.run(print_data=True) is None
    assert calls == [] and "skipped ($TINYTON_SKIP_BENCHMARKS)" in capsys.readouterr().out


def test_submodules_are_attributes_as_in_triton():
    """`import triton` alone gives `triton.testing`, `triton.tools` and `triton.runtime.driver`."""
    assert triton.testing.do_bench is not None
    assert triton.tools.tensor_descriptor.TensorDescriptor.__name__ == "TensorDescriptor"
    assert triton.runtime.driver.active.get_current_target().backend == "cuda"


@pytest.mark.gpu
def test_autotune_times_configs_on_the_gpu(tmp_path, monkeypatch):
    monkeypatch.setattr(cache_module, "default_cache", lambda: cache_module.KernelCache(tmp_path))
    x, y, out = arrays(1 << 20)
    tuned_add.cache.clear()
    tuned_add[lambda meta: (triton.cdiv(meta["n"], meta["BLOCK"]),)](x, y, out, 1 << 20)
    np.testing.assert_array_equal(out, 3 * x)
    assert len(tuned_add.bench_timings) == 2
    assert cache_module.KernelCache(tmp_path).get_record("autotune", tuned_add._record_key((1 << 20, "float32", "float32", "float32"))) is not None
