"""float32 sin, cos and tan on the GPU are accurate to a few ulp (relative), as libdevice's that Triton calls:
`sin.approx.f32`/`cos.approx.f32` (absolute error ~2**-21) gave tan(x) = 0.06534938514 for 0.06534968317 and
sin(x) = -0.1135928556 for -0.1135931835 in a fuzz run on an H200.

The lowering (tinyton/lowering/tt_to_llvm/trig.py) is plain LLVM arithmetic (Cody-Waite up to REDUCTION_LIMIT,
Payne-Hanek beyond), so its IR is JIT-compiled for this host and compared with float64 NumPy: random values of
every magnitude up to float32's largest, every float32 nearest a multiple of pi/2 (where the reduction cancels
most), tiny values, subnormals, zeros, NaN, infinities. The PTX of kernels using them must assemble.
"""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

import tinyton as tt
import tinyton.language as tl
from tinyton.lowering.ptx import assemble_ptx
from toolchains import needs_ptxas

FUNCTIONS = ("sin", "cos", "tan")
MAX_ULPS = {"sin": 2.0, "cos": 2.0, "tan": 4.0}
"""Measured: 1.81, 1.81, 3.70 up to 2**20; 1.45, 1.45, 3.27 on 50,000 random values from 2**20 to 2**128."""


@pytest.fixture(scope="module")
def host_trig():
    """sin_f32, cos_f32, tan_f32 compiled for this host."""
    llb = pytest.importorskip("llvmlite.binding")
    from xdsl.dialects import llvm
    from xdsl.dialects.builtin import ModuleOp, f32
    from xdsl.ir import Block, Region

    from tinyton.lowering.ptx.llvmlite_ir import to_llvmlite
    from tinyton.lowering.tt_to_llvm import trig
    from tinyton.lowering.tt_to_llvm.emitter import Emitter

    llb.initialize_native_target()
    llb.initialize_native_asmprinter()
    class HostContext(Emitter):
        """The part of a KernelContext the trig lowering uses: an emitter with the module's helpers."""

        module_ops: dict = {}

    functions = []
    for name in FUNCTIONS:
        fn = llvm.FuncOp(name, llvm.LLVMFunctionType([f32], f32), body=Region(Block(arg_types=[f32])))
        em = HostContext(fn)
        em.insert(llvm.ReturnOp(getattr(trig, f"{name}_f32")(em, fn.body.block.args[0])))
        em.finish()
        functions.append(fn)
    machine = llb.Target.from_default_triple().create_target_machine()
    module = to_llvmlite(ModuleOp([*HostContext.module_ops.values(), *functions]), triple=llb.get_default_triple(), data_layout=str(machine.target_data))
    parsed = llb.parse_assembly(str(module))
    parsed.verify()
    engine = llb.create_mcjit_compiler(parsed, machine)
    engine.finalize_object()
    c_fn = ctypes.CFUNCTYPE(ctypes.c_float, ctypes.c_float)
    compiled = {name: c_fn(engine.get_function_address(name)) for name in FUNCTIONS}
    yield {name: np.vectorize(lambda x, f=f: np.float32(f(float(x))), otypes=[np.float32]) for name, f in compiled.items()}
    del engine


def _ulps(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """|got - want| in float32 ulps of the exact result (the smallest subnormal's for tiny ones)."""
    return np.abs(got.astype(np.float64) - want) / np.spacing(np.abs(want).astype(np.float32)).astype(np.float64)


def _near_multiples_of_half_pi(limit: float) -> np.ndarray:
    """The float32s nearest k*pi/2 (k < limit / (pi/2)) and their two neighbours each side."""
    centre = (np.arange(1, int(limit / (np.pi / 2))) * (np.pi / 2)).astype(np.float32)
    out = [centre]
    up, down = centre, centre
    for _ in range(2):
        up, down = np.nextafter(up, np.float32(np.inf)), np.nextafter(down, np.float32(0))
        out += [up, down]
    return np.concatenate(out)


def _cases(rng: np.random.Generator) -> np.ndarray:
    magnitudes = 2.0 ** rng.uniform(-149, 20, 60000) * rng.choice([-1.0, 1.0], 60000)
    large = 2.0 ** rng.uniform(20, 128, 20000) * rng.choice([-1.0, 1.0], 20000)  # the Payne-Hanek reduction
    seen = np.float32([-4.2535293e37, 2.0**20 + 1, 3.4028235e38, -3.4028235e38])  # the H200's cos(-4.25e37) had its sign wrong
    near = _near_multiples_of_half_pi(2.0**13)
    sparse_near = _near_multiples_of_half_pi(2.0**20)[:: 97]
    subnormals = rng.integers(1, 2**23, 2000).astype(np.uint32).view(np.float32)
    fuzz = [np.arctan(0.06534968317), np.arcsin(-0.1135931835)]  # the H200's results: inputs near these
    tiny = np.float32([1e-30, 2.0**-12, 2.0**-13, 1e-5, *fuzz, np.pi / 4, 0.7853982])
    return np.concatenate([magnitudes.astype(np.float32), large.astype(np.float32), seen, near, -near, sparse_near,
                           subnormals, -subnormals, tiny, -tiny])  # fmt: skip


@pytest.mark.parametrize("name", FUNCTIONS)
def test_trig_is_within_a_few_ulps(host_trig, name: str) -> None:
    x = _cases(np.random.default_rng(0))
    got = host_trig[name](x)
    want = getattr(np, name)(x.astype(np.float64))
    errors = _ulps(got, want)
    worst = int(np.argmax(errors))
    assert errors[worst] <= MAX_ULPS[name], (x[worst], got[worst], want[worst], errors[worst])


@pytest.mark.parametrize("name", FUNCTIONS)
def test_trig_special_values(host_trig, name: str) -> None:
    """NaN and infinities give NaN; signed zeros as NumPy (sin(-0) = -0, cos(+-0) = 1, tan(-0) = -0)."""
    x = np.float32([np.nan, np.inf, -np.inf, 0.0, -0.0, 2.0**-149, -(2.0**-149)])
    with np.errstate(invalid="ignore"):
        got = host_trig[name](x)
        want = getattr(np, name)(x)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got[3:]), np.signbit(want[3:]))


@tt.jit
def trig_kernel(x_ptr, o_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + offs)
    tl.store(o_ptr + offs, tl.sin(x) + tl.cos(x) * tl.math.tan(x))


@needs_ptxas
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_trig_ptx_assembles(dtype: type) -> None:
    """No `sin.approx` at all, FMAs of both reductions (float64 past REDUCTION_LIMIT), and ptxas accepts it."""
    x = np.zeros(128, dtype)
    ptx = trig_kernel.compile(x, x.copy(), N=128).asm["ptx"]
    assert "fma.rn.f32" in ptx and "cvt.rni.f32.f32" in ptx and "cvt.rmi.f64.f64" in ptx and "sin.approx" not in ptx
    assemble_ptx(ptx, "sm_90")
