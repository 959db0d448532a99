"""`@tt.jit`: `JITFunction`, specialisation, and the launch fast path.

`kernel[grid]` returns the last call shape's generated fast path (`CallShape.launch`,
tinyton/frontend/arguments.py) bound to that grid with `functools.partial` (cached per grid tuple), so a
launch runs in that one Python frame: it checks the argument types, builds the flat plan key (dtypes,
16-byte alignment of addresses, ints mod 16 and whether they are 1, constexpr values and types, launch
options), finds the `_Plan`, checks the globals it read and calls the plan's driver launch bound to the grid
(`Launcher.bind`: the parameter values go straight to its prebuilt parameter buffer). Anything else takes
the slow path: bind the arguments by name, check them, compute the specialisation key (constexpr
values and types, argument types, 16-divisibility of pointers and ints, ints equal to 1:
tinyton/frontend/specialisation.py, num_warps), compile the variant if it is new, and make the call's
shape the current fast path.

A function whose body has a `return <value>` is an array program instead: calling it traces, fuses and
runs it (tinyton/frontend/programs.py, then tinyton/compiler/program.py).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from tinyton.errors import CompilationError, call_error
from tinyton.frontend.names import Reads
from tinyton.frontend.options import DEFAULT_NUM_STAGES, LAUNCH_OPTIONS, launch_options
from tinyton.frontend.source import KernelSource, Param, constexpr_value, returns_values
from tinyton.lazy import lazy_module
from tinyton.profiling import stage
from tinyton.runtime.devices import device_of_call, running_on
from tinyton.runtime.streams import current_stream

if TYPE_CHECKING:
    from xdsl.ir import Attribute

    from tinyton.compiler import CompiledKernel
    from tinyton.frontend.arguments import CallShape
    from tinyton.frontend.programs import ProgramCalls

# Decorating a function needs none of these (tinyton/lazy.py): they load with the first launch or call.
compiler = lazy_module("tinyton.compiler.kernel")
arguments = lazy_module("tinyton.frontend.arguments")
codegen = lazy_module("tinyton.frontend.codegen")
programs = lazy_module("tinyton.frontend.programs")
driver = lazy_module("tinyton.runtime.driver")  # NumPy too: a quarter of a second
target = lazy_module("tinyton.compiler.target")

MAX_PLANS = 4096
"""Plans kept per kernel before the plan cache is reset (keys of keyword constexprs are unbounded)."""


class _Plan:
    """One plan key's launch: the compiled variant, the globals it read, whether the GPU fast path applies
    (all runtime arguments device-resident or scalars, whose values the classifier extracts), and whether
    torch tensors come in (then launches follow torch's current stream, unless the caller chose one).
    `bound`: grid -> the driver's launch bound to it (`Launcher.bind`), what a fast launch calls as
    `(plan.bound.get(grid) or plan.bind(grid))(stream, values)`."""

    __slots__ = ("bound", "fast", "kernel", "reads", "torch_inputs")

    def __init__(self, kernel: CompiledKernel, reads: Reads, fast: bool, torch_inputs: bool = False):
        self.kernel, self.reads, self.fast, self.torch_inputs = kernel, reads, fast, torch_inputs
        self.bound: dict[tuple[int, int, int], Callable[[int, tuple], None]] = {}

    def bind(self, grid: tuple[int, int, int]) -> Callable[[int, tuple], None]:
        """The launch of this plan's kernel on `grid`, bound now and kept."""
        if len(self.bound) >= MAX_PLANS:
            self.bound.clear()
        launch = self.bound[grid] = self.kernel.launcher.bind(grid, self.kernel.threads)
        return launch


def _no_launch(*args: Any, **kwargs: Any) -> None:
    """The launcher of an empty grid."""


def not_specialized(params: Sequence[Param], names: Sequence[str | int]) -> frozenset[str]:
    """The parameter names of `do_not_specialize` (given by name or position)."""
    by_name = {p.name for p in params}
    chosen = set()
    for n in names:
        name = params[n].name if isinstance(n, int) and 0 <= n < len(params) else n
        if name not in by_name:
            raise ValueError(f"do_not_specialize: {n!r} is not a parameter (parameters: {', '.join(sorted(by_name))})")
        chosen.add(name)
    return frozenset(chosen)


class JITFunction:
    """A `@tt.jit` function: a kernel (`fn[grid](...)`) or an array program (`fn(...)`); called from a
    kernel, it is inlined (tinyton/frontend/calls.py)."""

    __tt_jit__ = True

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        do_not_specialize: Sequence[str | int] = (),
        noinline: bool = False,
        debug: bool | None = None,
    ):
        self.fn = fn
        self.noinline, self.debug = noinline, debug
        functools.update_wrapper(self, fn)
        try:
            self.source: KernelSource | None = KernelSource.parse(fn)
            self._source_error: CompilationError | None = None
        except CompilationError as e:
            self.source, self._source_error = None, e
        self.is_kernel = self.source.is_kernel if self.source else not returns_values(fn)
        params = self.source.params if self.source else ()
        self.params: tuple[Param, ...] = params
        self._runtime = tuple(i for i, p in enumerate(params) if not p.constexpr)
        self.do_not_specialize = not_specialized(params, do_not_specialize)
        self._plans: dict[Any, _Plan] = {}
        self._call_shapes: dict[tuple, CallShape] = {}
        self._launch_fast: Callable[..., Any] | None = None
        """The fast path of the last call shape (`CallShape.launch`): `kernel[grid]` is it bound to the grid."""
        self._variants: dict[Any, CompiledKernel] = {}
        self._reads: dict[Any, Reads] = {}  # per variant: the globals it read
        self._bound: dict[Any, Callable[..., None]] = {}

    @functools.cached_property
    def _calls(self) -> ProgramCalls:
        """The array-program call path, made on the first call (an instance attribute from then on)."""
        return programs.ProgramCalls(self.fn)

    def kernel_source(self) -> KernelSource:
        """The parsed source (raises its CompilationError if it could not be parsed)."""
        if self.source is None:
            raise self._source_error
        return self.source

    def __repr__(self) -> str:
        return f"<tt.jit {'kernel' if self.is_kernel else 'array program'} {self.fn.__qualname__}>"

    # ---- array programs ---------------------------------------------------------------------

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.is_kernel:
            raise call_error(
                f"`{self.__name__}` is a kernel (it returns nothing): launch kernels with kernel[grid](...), "
                f"e.g. {self.__name__}[(programs,)](...)"
            )
        return self._calls.call(self._positional(args, kwargs) if kwargs else args)

    def _positional(self, args: Sequence[Any], kwargs: dict[str, Any]) -> tuple:
        if not kwargs:
            return tuple(args)
        bound = inspect.signature(self.fn).bind(*args, **kwargs)
        bound.apply_defaults()
        return bound.args

    # ---- kernels: launch ----------------------------------------------------------------------

    def __getitem__(self, grid: Any) -> Callable[..., Any]:
        """`kernel[grid]`: grid is a tuple of 1-3 ints, or a callable of the meta-parameters dict."""
        bound = self._bound.get(grid) if type(grid) is tuple else None
        if bound is None:
            self._require_source()
            if not self.is_kernel:
                raise call_error(
                    f"`{self.__name__}` returns a value, so it is an array program: call it directly, {self.__name__}(...)"
                )
            if callable(grid):
                return functools.partial(self._run, grid)
            target = _grid_of(grid)
            bound = _no_launch if 0 in target else functools.partial(self._launch_fast or self._run, target)
            if type(grid) is tuple and len(self._bound) < MAX_PLANS:
                self._bound[grid] = bound
        return bound

    def _launch_miss(self, grid: tuple[int, int, int], args: tuple, kwargs: dict[str, Any], tried: Callable[..., Any]) -> CompiledKernel:
        """A call a fast path did not launch: the last call shape's fast path if the caller held another
        one's (a `kernel[grid]` kept from before), else the slow path."""
        fast = self._launch_fast
        if fast is not None and fast is not tried:
            return fast(grid, *args, **kwargs)
        return self._run(grid, *args, **kwargs)

    def _run(self, grid: Any, /, *args: Any, **kwargs: Any) -> CompiledKernel:
        """Launch through the slow path (plan, compiled if new) and make this call shape's fast path the
        current one; the compiled kernel it ran (Triton's launch result: `.asm`, `.n_regs`, `.metadata`)."""
        plan, values = self._plan(args, kwargs)
        if type(grid) is not tuple:
            grid = self._grid(grid, args, kwargs)
            if 0 in grid:
                return plan.kernel
        if plan.fast:  # device arguments only: they decide the device (the plan's key holds it)
            with running_on(device_of_call((*args, *kwargs.values()), f"{self.__name__}[grid]")):
                (plan.bound.get(grid) or plan.bind(grid))(current_stream(plan.torch_inputs), values)
        else:
            _launch(plan.kernel, grid, self._runtime_args(args, kwargs), plan.torch_inputs)
        return plan.kernel

    def _run_compiled(self, kernel: CompiledKernel, grid: Any, *args: Any) -> None:
        """`compiled[grid](*args)` (Triton's launch of a `warmup` result): every parameter positionally,
        the constexprs as compiled (not checked, as Triton)."""
        if len(args) != len(self.params):
            raise call_error(f"{kernel.name}[grid]() takes {len(self.params)} argument(s), got {len(args)}")
        if type(grid) is not tuple:
            grid = _grid_of(grid({p.name: v for p, v in zip(self.params, args)} | kernel.options))
        runtime = arguments.runtime_values([args[i] for i in self._runtime])
        _launch(kernel, grid, runtime, any(type(v).__module__.partition(".")[0] == "torch" for v in runtime))

    def _grid(self, grid: Callable[[dict], Any], args: tuple, kwargs: dict[str, Any]) -> tuple[int, int, int]:
        values, options = self._bind(args, kwargs)
        meta = {p.name: v for p, v in zip(self.params, values)}
        meta.update(options)
        return _grid_of(grid(meta))

    def _runtime_args(self, args: tuple, kwargs: dict[str, Any]) -> list[Any]:
        values, _ = self._bind(args, kwargs)
        return arguments.runtime_values([values[i] for i in self._runtime])

    def warmup(self, *args: Any, grid: Any = None, **kwargs: Any) -> CompiledKernel:
        """Compile the variant these arguments launch without launching it (Triton's `warmup`; `grid` is
        accepted and unused)."""
        return self.compile(*args, **kwargs)

    # ---- kernels: specialisation (slow path) -----------------------------------------------------

    def compile(self, *args: Any, **kwargs: Any) -> CompiledKernel:
        """The variant these arguments launch (`num_warps=`, constexprs by name), compiled, not launched."""
        if not self.is_kernel:
            fuse = kwargs.pop("fuse", None)
            return programs.compile_array_program(self.fn, self._positional(args, kwargs), fuse=fuse)
        self._require_source()
        return self._plan(args, kwargs)[0].kernel

    def _require_source(self) -> None:
        if self.is_kernel and self._source_error is not None:
            raise self._source_error

    def _bind(self, args: tuple, kwargs: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
        """Arguments in parameter order (defaults filled in) and the launch options; TypeError names the
        culprits."""
        names = [p.name for p in self.params]
        # a keyword named like a launch option and a parameter is both (Triton: `num_stages: tl.constexpr`)
        shared = {n: kwargs[n] for n in names if n in LAUNCH_OPTIONS and n in kwargs}
        kwargs = dict(kwargs)
        options = launch_options(kwargs)
        kwargs.update(shared)
        if len(args) > len(names):
            raise call_error(
                f"{self.__name__}() takes {len(names)} argument(s) ({', '.join(names)}) but {len(args)} were given"
            )
        values, missing = list(args), []
        for p in self.params[len(args):]:
            if p.name in kwargs:
                values.append(kwargs.pop(p.name))
            elif p.default is not inspect.Parameter.empty:
                values.append(p.default)
            else:
                missing.append(p.name)
        problems = [f"missing argument(s) for {', '.join(missing)}"] if missing else []
        problems += [f"unexpected or repeated argument(s) {', '.join(kwargs)}"] if kwargs else []
        if problems:
            raise call_error(f"{self.__name__}() got {' and '.join(problems)} (parameters: {', '.join(names)})")
        return values, options

    def _plan(self, args: tuple, kwargs: dict[str, Any]) -> tuple[_Plan, tuple]:
        """Slow path: check and specialise the call, compile its variant if new, cache its plan; the plan and
        the call's parameter values."""
        values, options = self._bind(args, kwargs)
        num_warps = options["num_warps"]
        specs, constexprs = [], {}
        for p, v in zip(self.params, values):
            if p.constexpr:
                constexprs[p.name] = _constexpr(p.name, v)
                continue
            try:
                specs.append(arguments.argument_type(v, specialise=p.name not in self.do_not_specialize))
            except CompilationError as e:
                raise call_error(f"{self.__name__}() argument `{p.name}`: {e.message}") from None
        compiled_options = (num_warps, options["num_stages"], options["maxnreg"], target.requested_arch())
        variant_key = (compiled_options, tuple((type(v), v) for v in constexprs.values()), tuple(specs))
        kernel = self._variants.get(variant_key)
        if kernel is None or not self._reads[variant_key].current():
            kernel, self._reads[variant_key] = self._compile(constexprs, specs, options)
            self._variants[variant_key] = kernel
        reads = self._reads[variant_key]
        shape = (*map(type, args), *((k, type(v)) for k, v in kwargs.items()))
        call_shape = self._call_shapes.get(shape)
        if call_shape is None:
            kwarg_types = {k: type(v) for k, v in kwargs.items()}
            call_shape = arguments.classifier(
                self.params, [*map(type, args)], kwarg_types, LAUNCH_OPTIONS, self._plans, self._launch_miss
            )
            self._call_shapes[shape] = call_shape
        if self._launch_fast is not call_shape.launch:  # grids bound to another shape's fast path: bind anew
            self._launch_fast = call_shape.launch
            self._bound.clear()
        keys, parameter_values = call_shape.classify(args, kwargs)
        try:
            plan = self._plans.get(keys)
        except TypeError:  # an unhashable constexpr: such calls always take the slow path
            return _Plan(kernel, reads, False), parameter_values
        if plan is not None and plan.kernel is kernel:
            return plan, parameter_values
        torch_inputs = any(type(v).__module__.partition(".")[0] == "torch" for v in arguments.runtime_values(values))
        plan = _Plan(kernel, reads, driver.backend() == "cuda" and None not in parameter_values, torch_inputs)
        if len(self._plans) >= MAX_PLANS:
            self._plans.clear()
        self._plans[keys] = plan
        return plan, parameter_values

    def _compile(
        self, constexprs: dict[str, Any], specs: list[tuple[Attribute, str]], options: dict[str, Any]
    ) -> tuple[CompiledKernel, Reads]:
        runtime = [self.params[i] for i in self._runtime]
        signature = {p.name: t for p, (t, _) in zip(runtime, specs)}
        specialised = {p.name: s for p, (_, s) in zip(runtime, specs)}
        num_warps, num_stages = options["num_warps"], options["num_stages"]
        reads = Reads()
        driver.start_initialising()  # the compile to PTX asks for the GPU's architecture: cuInit meanwhile
        with stage(f"build kernel {self.fn.__name__} (Python AST -> tt)"):
            module = codegen.build_kernel(
                self.source, signature, constexprs, specialised=specialised, num_warps=num_warps,
                num_stages=num_stages, reads=reads,
            )
        kernel = compiler.compile_module(module, num_warps=num_warps)
        kernel.run_with_all_arguments = functools.partial(self._run_compiled, kernel)
        kernel.options = {**options, "num_stages": DEFAULT_NUM_STAGES if num_stages is None else num_stages}
        if driver.backend() == "cuda":
            kernel.launcher  # noqa: B018 - compile and load now, not inside the first timed launch
        return kernel, reads


def _launch(kernel: CompiledKernel, grid: Any, args: Sequence[Any], torch_inputs: bool) -> None:
    """Run the kernel on this machine's backend with its runtime arguments."""
    if driver.backend() == "cuda":
        with running_on(device_of_call(args, f"{kernel.name}[grid]")):
            kernel.launch(grid, args, current_stream(torch_inputs))
    else:
        kernel.simulate(grid, [arguments.simulator_argument(a) for a in args])


def _grid_of(grid: Any) -> tuple[int, int, int]:
    """`normalize_grid`, its error at the user's launch line."""
    try:
        return compiler.normalize_grid(grid)
    except ValueError as e:
        raise call_error(f"{e}; e.g. kernel[(tt.cdiv(n, BLOCK),)] or kernel[lambda meta: (...,)]") from None


def _constexpr(name: str, value: Any) -> Any:
    """A constexpr argument as the code generator sees it; it is compiled in, so it must be hashable."""
    value = constexpr_value(value)
    try:
        hash(value)
    except TypeError:
        what = f"an array of shape {tuple(value.shape)}" if hasattr(value, "shape") else f"a {type(value).__name__}"
        raise call_error(
            f"constexpr parameter `{name}` got {what}; constexprs are compiled into the kernel, so they take "
            "numbers, bools, strings, dtypes or tuples of them; pass arrays to runtime (non-constexpr) parameters"
        ) from None
    return value
