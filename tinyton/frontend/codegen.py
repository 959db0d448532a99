"""Python AST of a `@tt.jit` kernel -> a tt-dialect `builtin.module` with one `func.func`.

Expressions evaluate to kernel values: `Tile`s (SSA values) or Python values (constexprs, dtypes, modules,
functions). Names resolve in the kernel's scope, then its closure and globals as they are when it compiles
(recorded in `Reads`, so a launch can tell when one changes), then Python's builtins; a call
resolves its callee the same way and runs it only if it is a `tt.*` builtin (with the `TileBuilder`
active), a tile method, a compile-time helper (`float("inf")`, `min`, `tt.cdiv`, ...), or another
`@tt.jit` function, which is inlined (calls.py). Operations on Python values fold at compile time, which
is how constexpr parameters reach shapes, bounds and `if`s.

Control flow: loops in loops.py (`for` unrolled or `scf.for`, `while` as `scf.while`), branches in
control_flow.py (`if` and ternaries resolved at compile time or `scf.if`); returns.py moves every
`return` to the end of its block first, so a `return` inside a runtime `if` is a branch too. Every error
is a `CompilationError` at the user's `file:line:col`.
"""

from __future__ import annotations

import ast
import builtins
import functools
import inspect
import operator
from collections.abc import Mapping
from typing import Any

from xdsl.dialects import func
from xdsl.dialects.builtin import (
    ArrayAttr,
    DictionaryAttr,
    IntegerAttr,
    ModuleOp,
    i1,
    i32,
)
from xdsl.ir import Attribute
from xdsl.transforms.common_subexpression_elimination import cse
from xdsl.transforms.dead_code_elimination import dce
from xdsl.utils.exceptions import VerifyException

from tinyton.errors import CompilationError
from tinyton.frontend import specialisation
from tinyton.frontend.block_pointers import DescriptorArg
from tinyton.frontend.calls import bind_arguments, callee_source, is_jit_function
from tinyton.frontend.control_flow import ControlFlow, Undefined
from tinyton.frontend.loops import Loops
from tinyton.frontend.names import MISSING, Reads
from tinyton.frontend.returns import RESULT
from tinyton.frontend.semantic import TileBuilder
from tinyton.frontend.source import KernelSource, constexpr, constexpr_value
from tinyton.frontend.values import (
    KERNEL_BUILDERS,
    TILE_ATTRIBUTE_ALIASES,
    TILE_ATTRIBUTES,
    TILE_METHODS,
    Tile,
    builtin_name,
    describe,
    f32,
    is_number,
)
from tinyton.intmath import cdiv, next_power_of_2

BINOPS = {
    ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%",
    ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^", ast.LShift: "<<", ast.RShift: ">>",
}
CMPOPS = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}
PYTHON_CMPOPS = {
    ast.Is: operator.is_, ast.IsNot: operator.is_not,
    ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b,
}
UNSUPPORTED = {
    ast.Try: "try/except is not supported in kernels",
    ast.Lambda: "lambda is not supported in kernels",
    ast.FunctionDef: "nested functions are not supported in kernels",
    ast.With: "`with` is not supported in kernels",
    ast.Break: "`break` is not supported (as in Triton); loop with `while cond:` or guard the rest with `if`",
    ast.Continue: "`continue` is not supported (as in Triton); put the rest of the body under an `if`",
    ast.ListComp: "comprehensions are not supported in kernels",
    ast.Pow: "`**` of runtime values is not supported (as in Triton); multiply (x * x) or use tt.exp/tt.log",
    ast.MatMult: "`@` is not supported in kernels; use tt.dot(a, b)",
}
COMPILE_TIME_FUNCTIONS = (float, int, bool, min, max, abs, len, cdiv, next_power_of_2)
"""Plain functions a kernel may call on constexpr values (evaluated while compiling)."""
RUNTIME_FUNCTIONS = {
    min: lambda b, *xs: functools.reduce(lambda x, y: b.binary("minimum", x, y), xs),
    max: lambda b, *xs: functools.reduce(lambda x, y: b.binary("maximum", x, y), xs),
    abs: lambda b, x: b.unary("abs", x),
    cdiv: lambda b, x, y: b.binary("//", b.binary("-", b.binary("+", x, y), 1), y),
}
"""The same functions on runtime values (as Triton: `min(a, b)` is `tl.minimum(a, b)`)."""


class KernelCodegen(ControlFlow, Loops):
    """Walks the kernel's AST, keeping `scope` (name -> value) and emitting ops through `builder`."""

    def __init__(
        self, source: KernelSource, builder: TileBuilder, scope: dict[str, Any], reads: Reads, calls: tuple = ()
    ):
        self.src, self.b, self.scope, self.reads = source, builder, scope, reads
        self.calls = calls  # the @tt.jit functions being inlined around this one, outermost first
        self.loop_depth = 0  # > 0 inside loops

    def visit(self, node: ast.AST) -> Any:
        method = getattr(self, f"visit_{type(node).__name__}", None)
        try:
            if method is None:
                raise CompilationError(UNSUPPORTED.get(type(node), f"{type(node).__name__} is not supported in kernels"))
            return method(node)
        except CompilationError as e:
            located = e.locate(self.src.where, node)
            if located is e:
                raise
            raise located from None

    def visit_body(self, stmts: list[ast.stmt]) -> None:
        for stmt in stmts:
            self.visit(stmt)

    def line(self, node: ast.AST) -> int:
        return self.src.where.of(node)[0]

    # ---- statements -------------------------------------------------------------------------

    def visit_Expr(self, node: ast.Expr) -> None:
        if not isinstance(node.value, ast.Constant):  # docstrings
            self.visit(node.value)

    def visit_Pass(self, node: ast.Pass) -> None:
        pass

    def visit_Assign(self, node: ast.Assign) -> None:
        value = self.visit(node.value)
        for target in node.targets:
            self.assign(target, value)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is None:
            raise CompilationError("a declaration needs a value in kernels (x: tt.constexpr = 4)")
        self.assign(node.target, self.visit(node.value))

    def assign(self, target: ast.expr, value: Any) -> None:
        if isinstance(target, ast.Name):
            self.scope[target.id] = value
        elif isinstance(target, (ast.Tuple, ast.List)):
            if not isinstance(value, tuple) or len(value) != len(target.elts):
                raise CompilationError(f"cannot unpack {describe(value)} into {len(target.elts)} names")
            for t, v in zip(target.elts, value):
                self.assign(t, v)
        else:
            raise CompilationError(
                f"cannot assign to `{ast.unparse(target)}`: tiles are values; build a new one (e.g. with "
                "tt.where) or write memory with tt.store"
            )

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        if not isinstance(node.target, ast.Name):
            raise CompilationError(f"cannot assign to `{ast.unparse(node.target)}`; only names can be updated")
        current = self.lookup(node.target.id)
        op = self.binop(node.op)
        call = node.value
        fn = self.visit(call.func) if isinstance(call, ast.Call) else None
        if op == "+" and builtin_name(fn) == "dot":
            args, kwargs = self.arguments(call)
            fits = isinstance(current, Tile) and current.element == f32 and len(args) == 2
            fits = fits and set(kwargs) <= {"input_precision", "max_num_imprecise_acc"}
            if fits and all(isinstance(x, Tile) and len(x.shape) == 2 for x in args):
                fits = current.shape == (args[0].shape[0], args[1].shape[1])
            if fits:  # acc += tt.dot(a, b) accumulates in place: one tt.dot
                self.scope[node.target.id] = self.call(fn, [*args, current], kwargs)
                return
            value = self.call(fn, args, kwargs)
        else:
            value = self.visit(node.value)
        self.scope[node.target.id] = self.b.binary(op, current, value)

    def visit_Return(self, node: ast.Return) -> None:
        """A `return` in tail position (returns.hoist_returns put it there): record the result."""
        if self.loop_depth:
            raise CompilationError("`return` inside a loop is not supported; loop with `while cond:` instead")
        value = None if node.value is None else self.visit(node.value)
        if value is not None and not self.calls:
            raise CompilationError("kernels cannot return values; store results with tt.store")
        self.scope[RESULT] = value

    # ---- expressions ------------------------------------------------------------------------

    def visit_Constant(self, node: ast.Constant) -> Any:
        if node.value is not None and not isinstance(node.value, (bool, int, float, str)):
            raise CompilationError(f"constants of type {type(node.value).__name__} are not supported")
        return node.value

    def visit_Name(self, node: ast.Name) -> Any:
        return self.lookup(node.id)

    def lookup(self, name: str) -> Any:
        if name in self.scope:
            value = self.scope[name]
            if isinstance(value, Undefined):
                raise CompilationError(value.message)
            return value
        value = self.reads.read(self.src.namespace, name)  # recorded: a launch checks it has not changed
        if value is not MISSING:
            return constexpr_value(value)
        if hasattr(builtins, name):
            return getattr(builtins, name)
        raise CompilationError(f"name `{name}` is not defined")

    def visit_Attribute(self, node: ast.Attribute) -> Any:
        value = self.visit(node.value)
        if is_number(value) and node.attr in TILE_ATTRIBUTES:
            value = self.b.tile(value, f".{node.attr}")  # a constexpr number as Triton's scalar tensor: `acc.to(...)`
        if isinstance(value, Tile):
            if node.attr not in TILE_ATTRIBUTES:
                raise CompilationError(f"tiles have no attribute `{node.attr}` (they have .to(), .shape and .dtype)")
            return getattr(value, TILE_ATTRIBUTE_ALIASES.get(node.attr, node.attr))
        try:
            return constexpr_value(getattr(value, node.attr))
        except AttributeError:
            raise CompilationError(f"`{ast.unparse(node.value)}` has no attribute `{node.attr}`") from None

    def binop(self, op: ast.operator) -> str:
        if type(op) not in BINOPS:
            raise CompilationError(UNSUPPORTED.get(type(op), f"operator {type(op).__name__} is not supported"))
        return BINOPS[type(op)]

    def visit_BinOp(self, node: ast.BinOp) -> Any:
        if isinstance(node.op, ast.Pow):  # constexprs only (`2**35`), as Triton
            base, exponent = self.visit(node.left), self.visit(node.right)
            if is_number(base) and is_number(exponent):
                return base**exponent
        op = self.binop(node.op)
        return self.b.binary(op, self.visit(node.left), self.visit(node.right))

    def visit_UnaryOp(self, node: ast.UnaryOp) -> Any:
        x = self.visit(node.operand)
        if isinstance(node.op, ast.USub):
            return self.b.unary("neg", x)
        if isinstance(node.op, ast.Not):
            return self.b.logical_not(x)
        if isinstance(node.op, ast.Invert):
            return self.b.invert(x)
        return x

    def visit_BoolOp(self, node: ast.BoolOp) -> Any:
        """`and`/`or`: Python's short-circuit on constexprs, a non-short-circuit i1 op on runtime scalars."""
        is_and = isinstance(node.op, ast.And)
        result = self.visit(node.values[0])
        for operand in node.values[1:]:
            if not isinstance(result, Tile) and bool(result) != is_and:
                return result
            value = self.visit(operand)
            if not isinstance(result, Tile):
                result = value
                continue
            if result.shape or (isinstance(value, Tile) and value.shape):
                raise CompilationError("`and`/`or` take scalars; combine tile masks with & and |")
            result = self.b.binary("&" if is_and else "|", self.b.truth(result, "and"), self.b.truth(value, "or"))
        return result

    def visit_Compare(self, node: ast.Compare) -> Any:
        left, result = self.visit(node.left), True
        for op, right_node in zip(node.ops, node.comparators):
            right = self.visit(right_node)
            if type(op) in PYTHON_CMPOPS:
                if isinstance(left, Tile) or isinstance(right, Tile):
                    raise CompilationError("`is` and `in` compare constexpr values only; use == for tiles")
                value = PYTHON_CMPOPS[type(op)](left, right)
            else:
                value = self.b.binary(CMPOPS[type(op)], left, right)
            result = value if result is True else self.b.binary("&", result, value)
            left = right
        return result

    def visit_IfExp(self, node: ast.IfExp) -> Any:
        """`a if c else b`: chosen at compile time on a constexpr, a branch (`scf.if`, only the taken arm
        runs) on a runtime scalar, `tt.where` on a tile condition."""
        cond = self.visit(node.test)
        if not isinstance(cond, Tile):
            return self.visit(node.body if cond else node.orelse)
        if cond.shape:
            return self.b.where(cond, self.visit(node.body), self.visit(node.orelse))
        return self.ternary(cond, node)

    def visit_Subscript(self, node: ast.Subscript) -> Any:
        value, key = self.visit(node.value), self.visit(node.slice)
        if isinstance(value, Tile):
            return self.b.subscript(value, key)
        try:
            return constexpr_value(value[key])
        except (TypeError, IndexError, KeyError) as e:
            raise CompilationError(f"cannot index {describe(value)}: {e}") from None

    def visit_Slice(self, node: ast.Slice) -> slice:
        return slice(*(None if x is None else self.visit(x) for x in (node.lower, node.upper, node.step)))

    def visit_Tuple(self, node: ast.Tuple | ast.List) -> tuple:
        return tuple(self.visit(e) for e in node.elts)

    visit_List = visit_Tuple

    def arguments(self, node: ast.Call) -> tuple[list[Any], dict[str, Any]]:
        args: list[Any] = []
        for a in node.args:
            if isinstance(a, ast.Starred):
                values = self.visit(a.value)
                if not isinstance(values, tuple):
                    raise CompilationError(f"cannot unpack {describe(values)}")
                args.extend(values)
            else:
                args.append(self.visit(a))
        if any(k.arg is None for k in node.keywords):
            raise CompilationError("**kwargs is not supported in kernels")
        return args, {k.arg: self.visit(k.value) for k in node.keywords}

    def visit_Call(self, node: ast.Call) -> Any:
        fn = self.visit(node.func)
        args, kwargs = self.arguments(node)
        self.b.location = f"{self.src.where.filename}:{self.line(node)}"
        return self.call(fn, args, kwargs)

    def call(self, fn: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
        builtin_name = getattr(fn, "__tt_builtin__", None)
        if builtin_name or getattr(fn, "__func__", None) in TILE_METHODS:
            try:
                inspect.signature(fn).bind(*args, **kwargs)
            except TypeError as e:
                raise CompilationError(f"{'tt.' + builtin_name if builtin_name else 'x.to'}(): {e}") from None
            return fn(*args, **kwargs)
        if fn is constexpr:
            return args[0] if len(args) == 1 and not kwargs else fn(*args, **kwargs)
        if any(isinstance(a, Tile) for a in args) and not kwargs and any(fn is f for f in RUNTIME_FUNCTIONS):
            return RUNTIME_FUNCTIONS[fn](self.b, *args)
        if fn is isinstance and len(args) == 2 and not kwargs:  # a kernel value's kind is known while compiling
            return isinstance(*args)  # (Triton's `isinstance(x, tl.tensor_descriptor)`)
        if any(fn is f for f in COMPILE_TIME_FUNCTIONS):
            if any(isinstance(a, Tile) for a in (*args, *kwargs.values())):
                raise CompilationError(
                    f"{fn.__name__}() is evaluated at compile time on constexprs; for tiles use tt.maximum, "
                    "tt.minimum, tt.abs or x.to(dtype)"
                )
            try:
                return fn(*args, **kwargs)
            except (TypeError, ValueError) as e:
                raise CompilationError(f"{fn.__name__}(): {e}") from None
        if is_jit_function(fn):
            return self.inline(fn, args, kwargs)
        what = getattr(fn, "__name__", describe(fn))
        raise CompilationError(
            f"only tt.* builtins and @tt.jit functions can be called inside a kernel; `{what}` is neither"
        )

    def inline(self, fn: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
        """Call the `@tt.jit` function `fn` by generating its body here (calls.py); its return value."""
        source = callee_source(fn, (*self.calls, self.src.fn))
        scope = bind_arguments(source, args, kwargs)
        inner = KernelCodegen(source, self.b, scope, self.reads, (*self.calls, self.src.fn))
        inner.visit_body(list(source.body))
        result = inner.scope.get(RESULT)
        if isinstance(result, Undefined):
            raise CompilationError(f"{source.name}(): {result.message}")
        return result


def build_kernel(
    source: KernelSource,
    signature: Mapping[str, Attribute | DescriptorArg],
    constexprs: Mapping[str, Any],
    *,
    specialised: Mapping[str, str] | None = None,
    num_warps: int = 4,
    num_stages: int | None = None,
    reads: Reads | None = None,
) -> ModuleOp:
    """The tt module of `source` specialised to `signature` (runtime parameter -> `!tt.ptr<..>`, i32, f32,
    i1 for a bool, which is passed as i32, or a `DescriptorArg`, several parameters) and `constexprs`
    (constexpr parameter -> value).

    `specialised` maps pointer/int parameters to what their values are known to be (`specialisation`: a
    multiple of 16 becomes `tt.divisibility`, the int 1 the constant 1; a descriptor's own parameters
    follow its `specs`); `num_stages`, when given, becomes the module attribute `tt.num_stages`; `reads`
    records the globals and closure variables the kernel (and the functions it inlines) read."""
    runtime = [p for p in source.params if not p.constexpr]
    arg_types, attrs, names, specs = [], [], [], []
    for p in runtime:
        kind = signature[p.name]
        types = kind.parameter_types() if isinstance(kind, DescriptorArg) else [i32 if kind == i1 else kind]
        arg_types += types
        specs += kind.specs if isinstance(kind, DescriptorArg) else [(specialised or {}).get(p.name, specialisation.NONE)]
        names += [p.name] + [f"{p.name}_{i}" for i in range(1, len(types))]
    divisible = DictionaryAttr({"tt.divisibility": IntegerAttr(16, 32)})
    attrs = [divisible if s == specialisation.DIVISIBLE else DictionaryAttr({}) for s in specs]
    function = func.FuncOp(source.name, (arg_types, []), arg_attrs=ArrayAttr(attrs))
    block = function.body.block
    builder = TileBuilder(block)
    scope: dict[str, Any] = {p.name: constexpr_value(constexprs[p.name]) for p in source.params if p.constexpr}
    KERNEL_BUILDERS.append(builder)
    try:
        values = []
        for arg, name, spec in zip(block.args, names, specs):
            arg.name_hint = name
            values.append(builder.constant(1, arg.type) if spec == specialisation.ONE else Tile(arg))
        args = iter(values)
        for p in runtime:
            kind = signature[p.name]
            if isinstance(kind, DescriptorArg):
                scope[p.name] = kind.bind([next(args) for _ in kind.parameter_types()])
            else:
                scope[p.name] = builder.truth(next(args), p.name) if kind == i1 else next(args)
        codegen = KernelCodegen(source, builder, scope, Reads() if reads is None else reads)
        builder.call_function = lambda fn, args: codegen.inline(fn, args, {})  # combine functions of tl.reduce
        codegen.visit_body(list(source.body))
    finally:
        KERNEL_BUILDERS.pop()
    block.add_op(func.ReturnOp())
    attributes = {"tt.num_warps": IntegerAttr(num_warps, 32)}
    if num_stages is not None:  # the launch's default pipelining depth of loops
        attributes["tt.num_stages"] = IntegerAttr(num_stages, 32)
    module = ModuleOp([function], attributes=attributes)
    cse(module)  # Python code repeats subexpressions (row * n_cols, rm[:, None], constants)
    dce(module)
    try:
        module.verify()
    except VerifyException as e:
        raise source.error(source.tree, f"internal error: the generated kernel does not verify: {e}") from None
    return module
