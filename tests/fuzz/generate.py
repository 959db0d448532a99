"""Seeded random array programs: the Python source of one `@tt.jit` program and its input arrays.

`generate(seed, index)` draws a DAG of NumPy-style operations over a pool of values (the inputs first):
every elementwise builtin and operator the `tt` namespace offers for arrays, casts, `where`, reductions
over any axis (negative, tuples, None, keepdims), transposes, `None`-indexing, matmuls of intermediates,
and the softmax / logsumexp / log-softmax idioms; inputs of ranks 0-4 that broadcast against each
other, float32/float16/int32/bool, with special values (+-inf, NaN, -0.0, huge and tiny magnitudes) and
a few long rows (up to 70,000 elements, sometimes starting with 4096 -inf). Each candidate statement is
evaluated on the NumPy reference (fuzz/reference.py) while drawing, so the program is valid NumPy and the
generator knows every value's shape and dtype; forms that array programs refuse on purpose (int matmuls)
and those the reference bounds no error for (float `//`, int powers other than 2-4) are not drawn.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from fuzz.draw_numpy import NumPySteps
from fuzz.reference import Ref
from fuzz.reference_ops import SHIM

FLOATS = ("float32", "float16")
"""Long rows' float types. float64 long rows are not drawn yet: fused ones accumulated in float32 (fixed,
tests/test_fuzz_regressions.py); drawing them changes every seed's row programs."""
DTYPE_WEIGHTS = {"float32": 0.36, "float16": 0.11, "float64": 0.1, "int32": 0.12, "int64": 0.06, "int8": 0.05,
                 "uint8": 0.05, "bool": 0.15}  # fmt: skip
SMALL_DIMS = (1, 2, 3, 4, 5, 7, 8, 16, 17, 32)
LONG_ROWS = (4097, 8192, 16385, 20000, 32768, 70000)
MAX_SMALL_SIZE = 2048
MATMUL_DTYPES = (np.float32, np.float16)
"""float64 matmuls are not drawn yet: they computed in float32 (fixed, tests/test_fuzz_regressions.py);
adding the dtype changes every seed's programs."""
ARRAY_DTYPES = ("bool", "int8", "uint8", "int16", "int32", "int64", "float16", "float32", "float64")
"""Array programs' types: a result NumPy gives in another (uint64 sums of uint8) is refused on purpose."""


@dataclass
class Value:
    name: str
    ref: Ref
    uses: int = 0
    bound: int | None = None
    """Set on int values whose entries are known to lie in [0, bound) (index arrays)."""

    shape = property(lambda self: self.ref.shape)
    dtype = property(lambda self: self.ref.dtype)
    ndim = property(lambda self: self.ref.ndim)

    @property
    def is_float(self) -> bool:
        return self.dtype.kind == "f"


@dataclass
class Case:
    """One generated program: `source` defines `name`; `inputs` are its arguments."""

    seed: int
    index: int
    name: str
    source: str
    inputs: list[np.ndarray]
    kind: str
    lines: list[str] = field(default_factory=list)


# ---- inputs -------------------------------------------------------------------------------------


def _special_values(dtype: np.dtype) -> list[float]:
    if dtype.kind == "f":
        info = np.finfo(dtype)
        return [np.inf, -np.inf, np.nan, -0.0, 0.0, float(info.max) / 2, -float(info.max) / 4, float(info.tiny) / 4, 1.0]
    info = np.iinfo(dtype)
    return [info.max, info.min, -1, 0, info.max // 2 + 1, info.min // 2]


def make_input(rng: np.random.Generator, shape: tuple[int, ...], dtype: np.dtype, specials: float, neg_inf_prefix: bool) -> np.ndarray:
    if dtype == np.bool_:
        return np.asarray(rng.random(shape) < 0.5)
    if dtype.kind in "iu":
        x = np.asarray(rng.integers(0 if dtype.kind == "u" else -100, 201 if dtype.kind == "u" else 101, size=shape), dtype)
    else:
        scale = float(rng.choice([1.0, 1.0, 4.0, 0.01]))
        x = np.asarray(rng.standard_normal(shape) * scale, dtype)
    if specials and x.size:
        mask = np.asarray(rng.random(shape) < specials)
        choices = np.array(_special_values(dtype), dtype=np.float64 if dtype.kind == "f" else np.int64).astype(dtype)
        x[mask] = rng.choice(choices, size=int(mask.sum()))
    if neg_inf_prefix and x.ndim and dtype.kind == "f":
        x[..., : min(4096, x.shape[-1] - 1)] = -np.inf
    return x


def _input_shape(rng: np.random.Generator, base: tuple[int, ...]) -> tuple[int, ...]:
    """A shape that broadcasts against `base`: a suffix of it, some dims set to 1."""
    shape = list(base[int(rng.integers(0, len(base) + 1)) :] if rng.random() < 0.3 else base)
    for i in range(len(shape)):
        if rng.random() < 0.2:
            shape[i] = 1
    return tuple(shape)


# ---- the program --------------------------------------------------------------------------------


class Builder(NumPySteps):
    def __init__(self, rng: np.random.Generator, kind: str):
        self.rng, self.kind = rng, kind
        self.pool: list[Value] = []
        self.lines: list[str] = []
        self.env: dict[str, Any] = {}

    def pick(self, pred: Callable[[Value], bool] = lambda v: True) -> Value | None:
        options = [v for v in self.pool if pred(v)]
        if not options:
            return None
        weights = np.array([1.0 + i for i in range(len(options))])  # prefer recent values: deeper DAGs
        return options[int(self.rng.choice(len(options), p=weights / weights.sum()))]

    def emit(self, expr: str, bound: int | None = None) -> Value | None:
        """Evaluate `expr` on the reference; keep it as a new value when NumPy accepts it."""
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # NumPy's warnings of the values it means
                result = eval(expr, {"tt": SHIM}, self.env)  # the generated text
        except (TypeError, ValueError, IndexError, OverflowError, np.exceptions.AxisError):
            return None
        if not isinstance(result, Ref) or result.dtype.name not in ARRAY_DTYPES or result.ndim > 4 or (self.kind != "row" and result.size > 4 * MAX_SMALL_SIZE):
            return None
        name = f"v{len(self.pool)}"
        self.env[name] = result
        self.lines.append(f"{name} = {expr}")
        value = Value(name, result, bound=bound)
        self.pool.append(value)
        for other in self.pool[:-1]:
            if other.name in expr.replace("(", " ").replace(")", " ").replace(",", " ").split():
                other.uses += 1
        return value

    # ---- operand text ---------------------------------------------------------------------------
    def scalar(self, v: Value) -> str:
        r = self.rng.random()
        if v.dtype.kind == "f" and r < 0.5:
            return repr(float(self.rng.choice([0.5, -2.0, 3.0, 1e-3, 1e4, -0.0, 0.0])))
        if r < 0.1:
            return repr(bool(self.rng.random() < 0.5))
        if r < 0.15:
            return "float('inf')" if self.rng.random() < 0.5 else "float('nan')"
        return repr(int(self.rng.choice([0, 1, 2, 3, -1, -7, 100, 1 << 20])))

    def other(self, a: Value) -> str:
        """A second operand for `a`: a pool value whose shape broadcasts with a's, or a Python scalar."""
        if self.rng.random() < 0.25:
            return self.scalar(a)
        b = self.pick(lambda v: _broadcastable(v.shape, a.shape))
        return b.name if b is not None else self.scalar(a)

    # ---- steps ----------------------------------------------------------------------------------
    def step(self) -> None:
        kinds = ["unary", "binary", "binary", "compare", "where", "reduce", "cast", "idiom", "ufunc", "ufunc",
                 "ufunc2", "astype", "reduce2", "reduce2", "scan", "sort", "gather", "block", "block"]  # fmt: skip
        if self.kind != "row":
            kinds += ["transpose", "matmul", "index", "slice", "slice", "advanced", "shape_op", "shape_op"]
        getattr(self, "_" + str(self.rng.choice(kinds)))()

    def _unary(self) -> None:
        v = self.pick()
        fn = str(self.rng.choice(["exp", "log", "sqrt", "rsqrt", "abs", "relu", "neg", "abs_op", "invert", "pos"]))
        expr = {
            "neg": f"-{v.name}",
            "abs_op": f"abs({v.name})",
            "invert": f"~{v.name}",
            "pos": f"+{v.name}",
        }.get(fn, f"tt.{fn}({v.name})")
        if fn == "invert" and v.is_float:
            return
        self.emit(expr)

    def _binary(self) -> None:
        a = self.pick()
        b = self.other(a)
        rng = self.rng
        op = str(rng.choice(["+", "-", "*", "/", "//", "%", "**", "maximum", "minimum", "&", "|", "^", "<<", ">>"]))
        bv = self.env.get(b)
        b_float = (bv.dtype.kind == "f") if isinstance(bv, Ref) else ("." in b or "inf" in b or "nan" in b)
        if op in ("maximum", "minimum"):
            args = [a.name, b] if rng.random() < 0.5 else [b, a.name]
            self.emit(f"tt.{op}({args[0]}, {args[1]})")
            return
        if op in ("//", "%"):
            if op == "//" and (a.is_float or b_float):
                return  # array programs refuse float floor division (not drawn)
            if not a.is_float and not b_float and isinstance(bv, Ref):
                b = f"tt.where({b} == 0, 1, {b})"  # int division by zero belongs to the kernel language
            elif not isinstance(bv, Ref) and b.strip("-") in ("0", "0.0", "False"):
                b = "3"
        if op == "**":
            if a.is_float and rng.random() < 0.5:
                b = str(rng.choice(["2", "3", "4", "0.5", "1.5", "-1.0", "2.5"]))
            elif not a.is_float:
                b = repr(int(rng.choice([2, 3, 4])))
            elif not b_float:
                return
        if op in ("&", "|", "^", "<<", ">>"):
            if a.is_float or b_float:
                return
            if op in ("<<", ">>"):
                if a.dtype == np.bool_ or not isinstance(bv, Ref) and b in ("True", "False"):
                    return
                b = f"({b} & 31)" if isinstance(bv, Ref) else repr(int(rng.integers(0, 32)))
        lhs, rhs = (a.name, b) if rng.random() < 0.7 else (b, a.name)
        if op in ("//", "%", "**", "<<", ">>"):
            lhs, rhs = a.name, b  # the guarded divisor / exponent / shift stays on the right
        self.emit(f"{lhs} {op} {rhs}")

    def _compare(self) -> None:
        a = self.pick()
        op = str(self.rng.choice(["<", "<=", ">", ">=", "==", "!="]))
        self.emit(f"{a.name} {op} {self.other(a)}")

    def _where(self) -> None:
        c = self.pick(lambda v: v.dtype == np.bool_)
        a = self.pick()
        if c is None or a is None:
            return
        cond = c.name if self.rng.random() < 0.7 else f"{a.name} > {self.other(a)}"
        self.emit(f"tt.where({cond}, {a.name}, {self.other(a)})")

    def _axis(self, v: Value) -> str:
        r, nd = self.rng.random(), v.ndim
        if nd == 0 or r < 0.2:
            return "None"
        if r < 0.4 and nd >= 2:
            axes = sorted(self.rng.choice(nd, size=int(self.rng.integers(2, nd + 1)), replace=False).tolist())
            axes = [a - nd if self.rng.random() < 0.3 else a for a in axes]
            return "(" + ", ".join(map(str, axes)) + ",)"
        axis = nd - 1 if self.kind == "row" or r < 0.6 else int(self.rng.integers(0, nd))
        return str(axis - nd if self.rng.random() < 0.5 else axis)

    def _reduce(self) -> None:
        v = self.pick()
        fn = str(self.rng.choice(["sum", "max", "min", "mean"]))
        axis = self._axis(v)
        if fn in ("max", "min") and v.ref.size == 0:
            return
        keep = bool(self.rng.random() < 0.5)
        args = (f", axis={axis}" if axis != "None" or self.rng.random() < 0.5 else "") + (", keepdims=True" if keep else "")
        self.emit(f"{v.name}.{fn}({args.lstrip(', ')})" if self.rng.random() < 0.4 else f"tt.{fn}({v.name}{args})")

    def _cast(self) -> None:
        v = self.pick()
        dtype = str(self.rng.choice(["float32", "float16", "int32", "int1"]))
        self.emit(f"{v.name}.astype(tt.{dtype})")

    def _transpose(self) -> None:
        v = self.pick(lambda v: v.ndim >= 2)
        if v is None:
            return
        if self.rng.random() < 0.4:
            self.emit(f"{v.name}.T")
            return
        perm = self.rng.permutation(v.ndim).tolist()
        self.emit(f"tt.transpose({v.name}, {tuple(perm)!r})")

    def _index(self) -> None:
        v = self.pick(lambda v: v.ndim < 4)
        form = str(self.rng.choice(["[None]", "[..., None]", "[:, None]"]))
        if v is None or form == "[:, None]" and v.ndim == 0:
            return
        self.emit(f"{v.name}{form}")

    def _matmul(self) -> None:
        a = self.pick(lambda v: v.dtype in MATMUL_DTYPES and v.ndim >= 1 and v.ref.size <= 1024)
        if a is None:
            return
        k = a.shape[-1]
        b = self.pick(lambda v: v.dtype in MATMUL_DTYPES and v.ndim >= 1 and v.ref.size <= 1024 and (v.shape[-2] if v.ndim >= 2 else v.shape[0]) == k)
        if b is not None and self.rng.random() < 0.7:
            self.emit(f"{a.name} @ {b.name}" if self.rng.random() < 0.5 else f"tt.matmul({a.name}, {b.name})")
        elif a.ndim >= 2:
            perm = list(range(a.ndim))
            perm[-1], perm[-2] = perm[-2], perm[-1]
            self.emit(f"{a.name} @ tt.transpose({a.name}, {tuple(perm)!r})" if a.ndim > 2 else f"{a.name} @ {a.name}.T")

    def _idiom(self) -> None:
        v = self.pick(lambda v: v.is_float and v.ndim >= 1)
        if v is None:
            return
        axis = -1 if self.kind == "row" or self.rng.random() < 0.7 else int(self.rng.integers(0, v.ndim))
        m = self.emit(f"tt.max({v.name}, axis={axis}, keepdims=True)")
        if m is None:
            return
        which = str(self.rng.choice(["softmax", "logsumexp", "log_softmax"]))
        if which == "softmax":
            e = self.emit(f"tt.exp({v.name} - {m.name})")
            if e is not None:
                self.emit(f"{e.name} / tt.sum({e.name}, axis={axis}, keepdims=True)")
            return
        lse = self.emit(f"{m.name} + tt.log(tt.sum(tt.exp({v.name} - {m.name}), axis={axis}, keepdims=True))")
        if which == "log_softmax" and lse is not None:
            self.emit(f"{v.name} - {lse.name}")


def _broadcastable(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    return all(x == y or x == 1 or y == 1 for x, y in zip(reversed(a), reversed(b)))


def _case_kind(rng: np.random.Generator) -> str:
    r = rng.random()
    return "row" if r < 0.03 else "scalar" if r < 0.08 else "empty" if r < 0.11 else "small"


def _base_shape(rng: np.random.Generator, kind: str) -> tuple[int, ...]:
    if kind == "scalar":
        return ()
    if kind == "row":
        return (int(rng.integers(1, 3)), int(rng.choice(LONG_ROWS)))
    rank = int(rng.integers(1, 5))
    shape = [int(rng.choice(SMALL_DIMS)) for _ in range(rank)]
    while np.prod(shape) > MAX_SMALL_SIZE:
        shape[int(np.argmax(shape))] //= 2
    if kind == "empty":
        shape[int(rng.integers(0, rank))] = 0
    return tuple(shape)


def generate(seed: int, index: int) -> Case:
    """The `index`-th program of the run seeded `seed` (independent of the other indices)."""
    rng = np.random.default_rng([seed, index])
    kind = _case_kind(rng)
    base = _base_shape(rng, kind)
    builder = Builder(rng, kind)
    specials = float(rng.choice([0.0, 0.0, 0.02, 0.1] if kind != "row" else [0.0, 0.0, 0.0, 1e-4]))
    inputs: list[np.ndarray] = []
    names = list(DTYPE_WEIGHTS)
    weights = np.array(list(DTYPE_WEIGHTS.values()))
    for i in range(int(rng.integers(1, 4))):
        shape = base if i == 0 or kind == "row" else _input_shape(rng, base)
        dtype = np.dtype(str(rng.choice(names, p=weights / weights.sum())))
        if kind == "row" and (i == 0 or dtype == np.float64):  # no float64 long rows yet (FLOATS)
            dtype = np.dtype(str(rng.choice(FLOATS)))
        x = make_input(rng, shape, dtype, specials, neg_inf_prefix=kind == "row" and rng.random() < 0.5)
        name = f"x{i}"
        inputs.append(x)
        ref = Ref(x, 0.0)
        builder.env[name] = ref
        builder.pool.append(Value(name, ref))
    builder.lines = []
    if kind != "scalar" and base[-1] > 0 and rng.random() < 0.25:  # class targets in range: cross-entropy
        targets = rng.integers(0, base[-1], size=base[:-1] + (1,)).astype(str(rng.choice(["int32", "int64"])))
        inputs.append(targets)
        builder.env[f"x{len(inputs) - 1}"] = ref = Ref(targets, 0.0)
        builder.pool.append(Value(f"x{len(inputs) - 1}", ref, bound=base[-1]))
    if kind == "row" and rng.random() < 0.6:
        # softmax / logsumexp / log-softmax, or a model block, over a long row, maybe -inf padded
        builder._idiom() if rng.random() < 0.5 else builder._block()
    for _ in range(int(rng.integers(1, 9))):
        builder.step()
    if not builder.lines:
        builder.emit(f"{builder.pool[0].name} + 1")
    computed = builder.pool[len(inputs) :]
    sinks = [v.name for v in computed if v.uses == 0][-4:]
    extra = [v.name for v in computed if v.name not in sinks and rng.random() < 0.15]
    outs = sinks + extra[:1]
    if rng.random() < 0.03:
        outs.append("x0")  # returning an argument unchanged
    ret = outs[0] if len(outs) == 1 and rng.random() < 0.8 else "(" + ", ".join(outs) + ",)"
    name = f"fuzz_{seed}_{index}"
    params = ", ".join(f"x{i}" for i in range(len(inputs)))
    body = "".join(f"    {line}\n" for line in builder.lines)
    source = f"import tinyton as tt\n\n\ndef {name}({params}):\n{body}    return {ret}\n"
    return Case(seed, index, name, source, inputs, kind, builder.lines)
