"""Compiler driver: a tt kernel module -> `CompiledKernel` (lowering and PTX on demand), launch or simulate.

Independent of the Python frontend: `@tt.jit` kernels and the array-program executor both call
`compile_module`. Nothing is lowered until a stage needs it (`.asm["ptx"]`, `.launch`), so simulator-only
runs never pay for LLVM; the PTX is cached on disk (tinyton.runtime.cache) keyed by the tt IR text and the target. The
target architecture is decided here (`TINYTON_ARCH`, else the GPU's, else sm_90: `compiler/target.py`; sm_90a on an
sm_90 for kernels whose dots fit wgmma) and passed down to the PTX backend.
"""

from __future__ import annotations

import functools
import operator
import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from types import SimpleNamespace
from typing import Any

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import Float32Type, IntegerAttr, ModuleOp, i32, i64
from xdsl.ir import Attribute

from tinyton.analysis.pointers import written_params
from tinyton.compiler import target as targets
from tinyton.compiler.collector import collector_paused
from tinyton.dialects import tt
from tinyton.lazy import lazy_module
from tinyton.profiling import stage
from tinyton.runtime import driver
from tinyton.runtime.launch import Launcher, Module
from tinyton.runtime.devices import current_device
from tinyton.runtime.spans import memory_span
from tinyton.runtime.staging import stage_arguments
from tinyton.runtime.tensor_maps import DeviceTensorMap

cache = lazy_module("tinyton.runtime.cache")  # the disk cache: loaded with the first kernel compiled to PTX

STAGES = ("tt", "llvm-mlir", "llvm-ir", "ptx")
TRITON_STAGES = {"ttir": "tt", "ttgir": "tt", "llir": "llvm-ir"}
"""Triton's names of the stages in `kernel.asm` (tinyton has no separate GPU-layout IR text)."""
NOMINAL_REGISTERS = 32
"""`n_regs` where neither a GPU nor ptxas can tell the real count."""


def kernel_function(module: ModuleOp) -> func.FuncOp:
    """The module's one kernel."""
    kernels = [op for op in module.body.block.ops if isinstance(op, func.FuncOp)]
    if len(kernels) != 1:
        raise ValueError(f"a kernel module holds exactly one func.func, found {len(kernels)}")
    return kernels[0]


def _param_kind(t: Attribute) -> str:
    """The driver Launcher's kind of a parameter type: "ptr" or a NumPy dtype name."""
    if tt.is_pointer(t):
        return "ptr"
    if t == i32:
        return "int32"
    if t == i64:
        return "int64"
    if isinstance(t, Float32Type):
        return "float32"
    raise ValueError(f"kernel parameters are pointers, i32, i64 or f32, got {t}")


class _Asm(Mapping[str, str]):
    """`kernel.asm`: the text of each stage, produced when first read."""

    def __init__(self, kernel: CompiledKernel):
        self._kernel = kernel

    def __getitem__(self, stage: str) -> str:
        return self._kernel.stage(TRITON_STAGES.get(stage, stage))

    def __iter__(self) -> Iterator[str]:
        return iter(STAGES)

    def __len__(self) -> int:
        return len(STAGES)


class CompiledKernel:
    """One kernel specialisation: its tt module, its lowered stages (lazily) and how to run it."""

    def __init__(self, module: ModuleOp, *, num_warps: int, arch: str | None = None, toolchain: str | None = None):
        self.module = module
        self.function = kernel_function(module)
        self.name = self.function.sym_name.data
        self.num_warps = num_warps
        self.param_kinds = tuple(_param_kind(t) for t in self.function.function_type.inputs)
        self.param_names = tuple(a.name_hint or f"arg{i}" for i, a in enumerate(self.function.body.block.args))
        self.written_params = written_params(self.function)
        self.cooperative = any(isinstance(op, tt.GridBarrierOp) for op in self.function.walk())
        """A grid barrier inside: launched cooperatively (all programs at once, or an error)."""
        self._resident: int | None = None
        self.arch, self.toolchain = arch, toolchain
        self.requested_arch = targets.requested_arch()
        """`TINYTON_ARCH` when the kernel was made (its PTX is compiled later, on demand)."""
        self.target_arch = arch
        """What the PTX is for: `arch`, else `TINYTON_ARCH` or the GPU's (sm_90a on an sm_90 when a dot uses wgmma)."""
        self.shared_bytes = 0
        self.options: dict[str, Any] = {"num_warps": num_warps}
        """The launch options it was compiled for (the frontend fills in num_stages, num_ctas, maxnreg)."""
        self._texts: dict[str, str] = {"tt": str(module)}
        self._launchers: dict[int, Any] = {}
        """Per device: the kernel's `Launcher` there."""
        self.tensor_maps: tuple[dict[str, Any], ...] = ()
        """Specs of the TMA maps the kernel takes after its parameters (tinyton/runtime/tensor_maps.py)."""
        self.launch_warps = num_warps
        """Warps a program is launched with once compiled: `num_warps`, and a warp-specialised kernel's producer."""
        self.waits_for_prior_grid = False
        """Once compiled: whether it may start before the launch before it completes (its module asked for
        `tt.overlap_prior_grid` and the target has `griddepcontrol`: tinyton/lowering/tt_to_llvm/grid_dependency.py)."""
        self.run_with_all_arguments: Callable[..., None] | None = None
        """`(grid, *every kernel argument, constexprs included)`: set by the `@jit` function that compiled
        it, which knows the parameters this variant fixed; what `compiled[grid](...)` calls."""

    def __getitem__(self, grid: Any) -> Callable[..., None]:
        """Triton's `compiled[grid](*args)`: launch this variant with the kernel's full argument list."""
        if self.run_with_all_arguments is None:
            raise TypeError(f"{self.name}: only a kernel compiled by a @jit function can be launched by [grid]")
        return functools.partial(self.run_with_all_arguments, grid)

    @property
    def asm(self) -> Mapping[str, str]:
        return _Asm(self)

    def stage(self, stage: str) -> str:
        if stage not in STAGES:
            raise KeyError(f"unknown stage {stage!r}; stages are {', '.join(STAGES)}")
        if stage not in self._texts:
            self._compile(use_cache=stage == "ptx")
        return self._texts[stage]

    def _compile(self, use_cache: bool) -> None:
        """Lower to PTX (from the disk cache when only the PTX is needed)."""
        # The lowering, LLVM and the cache are imported on first use (the lowering only on a cache miss):
        # `import tinyton` stays light, and a disk-cache hit in a fresh process loads no compiler stage.
        from tinyton.lowering.ptx import compile_llvm_module, resolve_toolchain

        with collector_paused(), stage(f"compile kernel {self.name} to PTX"):
            with stage("target: GPU architecture, toolchain"):
                arch = self.arch or self.requested_arch or driver.default_arch()
                toolchain = resolve_toolchain(self.toolchain)
            with stage("disk cache lookup"):
                tma = tma_enabled()
                key = cache.cache_key(self._texts["tt"], (self.num_warps, tma), toolchain, arch)
                entry = cache.default_cache().get(key) if use_cache else None
            if entry is None:
                from tinyton.lowering.tt_to_llvm import kernel_arch, lower_to_llvm

                with stage("lower tt -> llvm"):
                    llvm = self.module.clone()
                    target = arch if self.arch else kernel_arch(self.module, self.num_warps, arch)
                    info = lower_to_llvm(llvm, self.num_warps, shared_limit(target), target, tma)
                with stage(f"llvm -> PTX ({toolchain})"):
                    # Only the PTX wanted: the llvm dialect's text is not printed (a later `asm["llvm-mlir"]`
                    # compiles again, as after a disk-cache hit).
                    self._texts.update(
                        compile_llvm_module(llvm, arch=target, toolchain=toolchain, print_input=not use_cache)
                    )
                self.shared_bytes = int(getattr(info, "shared_bytes", 0) or 0)
                maps = [dict(spec) for spec in getattr(info, "tensor_maps", ())]
                extra: dict[str, Any] = {"tensor_maps": maps} if maps else {}
                if getattr(info, "launch_warps", 0) > self.num_warps:
                    extra["launch_warps"] = info.launch_warps
                if getattr(info, "waits_for_prior_grid", False):
                    extra["waits_for_prior_grid"] = True
                entry = cache.CacheEntry(
                    self.name, self._texts["ptx"], self.num_warps, self.shared_bytes, self.param_kinds, extra
                )
                with stage("disk cache store"):
                    cache.default_cache().put(key, entry)
            self._texts["ptx"], self.shared_bytes = entry.ptx, entry.shared_bytes
            self.tensor_maps = tuple(entry.extra.get("tensor_maps", ()))
            self.launch_warps = entry.extra.get("launch_warps", self.num_warps)
            self.waits_for_prior_grid = bool(entry.extra.get("waits_for_prior_grid", False))
            target = re.search(r"^\.target\s+(sm_\w+)", entry.ptx, re.MULTILINE)
            self.target_arch = target.group(1) if target else arch

    @property
    def launcher(self) -> Any:
        """The driver's `Launcher` of this kernel on the current device (compiles the PTX on first use and
        loads it once per device: one compile serves every device of the host)."""
        ordinal = current_device()
        launcher = self._launchers.get(ordinal)
        if launcher is None:
            ptx = self.stage("ptx")
            self._check_loadable()
            dynamic = self.shared_bytes if self.shared_bytes > driver.STATIC_SHARED_LIMIT else 0
            function = Module.from_ptx(ptx, ordinal).function(self.name, dynamic_shared_bytes=dynamic)
            maps = [DeviceTensorMap(spec) for spec in self.tensor_maps]
            launcher = Launcher(function, self.param_kinds, dynamic, maps, cooperative=self.cooperative)
            self._launchers[ordinal] = launcher
        return launcher

    def _check_loadable(self) -> None:
        """Refuse PTX the GPU cannot load (compiled for another `TINYTON_ARCH`): sm_NN PTX runs on compute
        capability NN and later, sm_90a's only on 9.0."""
        target, device = self.target_arch, driver.default_arch()
        if target is None or target.removesuffix("a") == device:
            return
        if int(target[3:5]) > int(device[3:5]) or target.endswith("a"):
            raise RuntimeError(
                f"kernel {self.name} was compiled for {target} ({targets.ENV} or arch=), which this {device} GPU "
                f"cannot run; unset {targets.ENV} or set it to {device}"
            )

    def resident_programs(self) -> int:
        """Programs the GPU holds at once (occupancy x SMs), queried once: a grid-barrier kernel's grid must
        not exceed it."""
        if self._resident is None:
            launcher = self.launcher
            per_sm = launcher.function.max_active_blocks(self.threads, launcher.dynamic_shared)
            self._resident = per_sm * driver.device(launcher.ordinal).sm_count
        return self._resident

    @property
    def metadata(self) -> SimpleNamespace:
        """Triton's `kernel.metadata`: `shared` (bytes of static shared memory, from the lowering),
        `num_warps`, `num_stages`, `num_ctas`, `maxnreg`, `name`."""
        self.stage("ptx")
        return SimpleNamespace(**{"num_stages": 3, "num_ctas": 1, "maxnreg": None, **self.options},
                               shared=self.shared_bytes, name=self.name)

    def _init_handles(self) -> None:
        """Triton's spelling: load the kernel on the GPU now (nothing to do without one)."""
        if driver.is_available():
            self.launcher  # noqa: B018 - loads the module

    @property
    def n_regs(self) -> int:
        """Registers per thread: the loaded function's, else ptxas's report, else NOMINAL_REGISTERS."""
        return self._usage()[0]

    @property
    def n_spills(self) -> int:
        """Spilled 4-byte registers (local memory per thread / 4), measured as `n_regs` is."""
        return self._usage()[1]

    def _usage(self) -> tuple[int, int]:
        if driver.is_available():
            function = self.launcher.function
            return function.attribute("NUM_REGS"), function.attribute("LOCAL_SIZE_BYTES") // 4
        from tinyton.lowering.ptx import (
            register_usage,  # with the PTX backend, on first use
        )

        ptx = self.stage("ptx")
        usage = register_usage(ptx, self.target_arch or self.requested_arch or driver.default_arch())
        return usage if usage is not None else (NOMINAL_REGISTERS, 0)

    @property
    def overlaps_prior_grid(self) -> bool:
        """Whether a launch of it may start while the launch before it on the stream finishes (programmatic
        stream serialization): it waits for that launch itself, and has no grid barrier. (A TMA map's upload,
        where one comes between it and the kernel before, is a copy: the kernel then waits for it as usual.)"""
        self.stage("ptx")
        return self.waits_for_prior_grid and not self.cooperative

    @property
    def threads(self) -> int:
        """Threads of a program: its warps and a warp-specialised kernel's producer warps, which compiling tells."""
        self.stage("ptx")
        return 32 * self.launch_warps

    def check_host_arrays(self, args: Sequence[Any]) -> None:
        """Refuse, before running, NumPy arguments that cannot be a pointer (negative strides) and read-only
        arrays the kernel may store through. Arrays that share memory are fine (an in-place kernel,
        `add(x, y, x)`): the GPU stages them together (tinyton/runtime/staging.py)."""
        arrays = {i: a for i, a in enumerate(args) if isinstance(a, np.ndarray)}
        for i, a in arrays.items():
            try:
                memory_span(a)
            except ValueError as e:
                raise ValueError(f"argument {i} ('{self.param_names[i]}'): {e}") from None
        for i in sorted(self.written_params & arrays.keys()):
            if not arrays[i].flags.writeable:
                raise ValueError(
                    f"argument {i} ('{self.param_names[i]}') is a read-only array, and kernel {self.name} stores "
                    "through it: pass a writable array (x.copy())"
                )

    def launch(self, grid: Sequence[int], args: Sequence[Any], stream: int = 0) -> None:
        """Run on the GPU. Host arrays are staged on the device (the memory span from each one's first element
        to its last; arrays sharing memory as one span) and copied back when the kernel writes them."""
        grid3 = normalize_grid(grid)
        if 0 in grid3:
            return
        self.check_host_arrays(args)
        arguments, written = stage_arguments(args, self.written_params)
        values = tuple(int(a.value) if a.dtype.kind == "b" else a.value for a in arguments)
        self.launcher.launch(grid3, self.threads, 0, stream, values)
        for staged in written:
            staged.copy_back(stream)

    def simulate(self, grid: Sequence[int], args: Sequence[Any]) -> None:
        """Run on the NumPy simulator: pointer arguments are NumPy arrays, updated in place."""
        from tinyton.runtime import (
            simulator,  # on first use: the xDSL interpreter is slow to import
        )

        grid3 = normalize_grid(grid)
        self.check_host_arrays(args)
        simulator.run(self.module, grid3, args)

    def __repr__(self) -> str:
        return f"<CompiledKernel {self.name} num_warps={self.num_warps} params={self.param_kinds}>"


SHARED_PER_PROGRAM = {80: 163 * 1024, 86: 99 * 1024, 87: 163 * 1024, 89: 99 * 1024, 90: 227 * 1024}
"""Shared memory one program may opt in to, per compute capability (CUDA's tables); others: 48 KiB."""


def tma_enabled() -> bool:
    """Whether sm_90 kernels read descriptor blocks with TMA (`TINYTON_TMA=0`: cp.async, for comparison)."""
    return os.environ.get("TINYTON_TMA", "1") != "0"


def shared_limit(arch: str) -> int:
    """Bytes of shared memory a program may use on `arch`: the GPU's own figure when it is the target."""
    if driver.is_available() and driver.default_arch() == arch.rstrip("a"):
        return driver.device().max_shared_per_block_optin
    return SHARED_PER_PROGRAM.get(int(arch[3:5]), driver.STATIC_SHARED_LIMIT)


def normalize_grid(grid: Any) -> tuple[int, int, int]:
    """A launch grid as (x, y, z): 1 to 3 non-negative ints within CUDA's limits, missing axes 1."""
    dims = tuple(grid) if isinstance(grid, (tuple, list)) else (grid,)
    try:
        dims = tuple(operator.index(d) for d in dims)
    except TypeError:
        dims = ()
    if not 1 <= len(dims) <= 3 or min(dims) < 0:
        raise ValueError(f"a grid is a tuple of 1 to 3 non-negative ints, got {grid!r}")
    for axis, (size, limit) in enumerate(zip(dims, driver.GRID_LIMITS)):
        if size > limit:
            raise ValueError(
                f"grid {grid!r}: axis {axis} has {size} programs, more than CUDA allows ({limit}); give each "
                "program more work (a larger block, or a loop inside the kernel)"
                + (" or put the programs on axis 0 (up to 2**31 - 1)" if axis else "")
            )
    return (*dims, *(1,) * (3 - len(dims)))  # type: ignore[return-value]


def compile_module(
    tt_module: ModuleOp, *, num_warps: int | None = None, arch: str | None = None, toolchain: str | None = None
) -> CompiledKernel:
    """A `CompiledKernel` of a tt kernel module; `num_warps` defaults to the module's `tt.num_warps` (else 4)."""
    if num_warps is None:
        attr = tt_module.attributes.get("tt.num_warps")
        num_warps = attr.value.data if isinstance(attr, IntegerAttr) else 4
    if num_warps not in (1, 2, 4, 8, 16):
        raise ValueError(f"num_warps must be 1, 2, 4, 8 or 16, got {num_warps}")
    return CompiledKernel(tt_module, num_warps=num_warps, arch=arch, toolchain=toolchain)
