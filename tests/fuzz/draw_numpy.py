"""The generator's steps over NumPy's wider op set and model blocks (mixed into fuzz.generate.Builder).

Every step writes one or a few statements of NumPy-style source over the pool's values; `emit` evaluates each
on the reference and drops the ones NumPy refuses. Index arrays are always in range: an input drawn in
`[0, n)`, `v % n` of an int value, or an argmax, each remembered as a value's `bound`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from tinyton.limits import MAX_SORTED_ROW

if TYPE_CHECKING:
    from fuzz.generate import Value

UFUNCS_1 = ("exp2", "expm1", "log2", "log10", "log1p", "sin", "cos", "tan", "tanh", "erf", "sigmoid", "floor",
            "ceil", "trunc", "rint", "sign", "square", "reciprocal", "isnan", "isinf", "isfinite", "logical_not",
            "negative", "positive", "absolute")  # fmt: skip
UFUNCS_2 = ("fmax", "fmin", "hypot", "logaddexp", "copysign", "arctan2", "logical_and", "logical_or", "logical_xor")
SCALARS = ("0.5", "-1.5", "2", "0", "-3", "True", "1e-3", "float('nan')", "float('inf')")


class NumPySteps:
    """Steps of fuzz.generate.Builder drawing the ufuncs, reductions, scans, indexing, shape ops and blocks."""

    rng: np.random.Generator
    kind: str
    pool: list[Value]

    # The Builder's own methods (declared for the type checker).
    pick: Any
    emit: Any
    other: Any
    scalar: Any
    _axis: Any

    def _choice(self, options: Any) -> Any:
        return options[int(self.rng.integers(0, len(options)))]

    def _int_axis(self, v: Value) -> int:
        axis = v.ndim - 1 if self.kind == "row" else int(self.rng.integers(0, v.ndim))
        return axis - v.ndim if self.rng.random() < 0.5 else axis

    # ---- elementwise ----------------------------------------------------------------------------
    def _ufunc(self) -> None:
        v = self.pick()
        self.emit(f"tt.{self._choice(UFUNCS_1)}({v.name})")

    def _ufunc2(self) -> None:
        a = self.pick()
        r = self.rng.random()
        if r < 0.15:
            lo, hi = self.other(a), self.other(a) if self.rng.random() < 0.7 else "None"
            self.emit(f"tt.clip({a.name}, {lo}, {hi})")
        elif r < 0.3:
            c = self.pick(lambda v: v.dtype == np.bool_)
            if c is not None:
                x = self._choice((a.name, self._choice(SCALARS)))
                self.emit(f"tt.where({c.name}, {x}, {self._choice(SCALARS)})")
        else:
            args = [a.name, self.other(a)]
            self.rng.shuffle(args)
            self.emit(f"tt.{self._choice(UFUNCS_2)}({args[0]}, {args[1]})")

    def _astype(self) -> None:
        v = self.pick()
        self.emit(f"{v.name}.astype(tt.{self._choice(('float64', 'int64', 'int8', 'uint8', 'float32'))})")

    # ---- reductions and scans -------------------------------------------------------------------
    def _reduce2(self) -> None:
        v = self.pick()
        fn = self._choice(("prod", "argmax", "argmin", "var", "std", "any", "all", "logsumexp"))
        keep = ", keepdims=True" if self.rng.random() < 0.4 else ""
        if fn in ("argmax", "argmin"):
            if v.ref.size == 0:
                return
            axis = "None" if v.ndim == 0 or self.rng.random() < 0.25 else str(self._int_axis(v))
            n = v.ref.size if axis == "None" else v.shape[int(axis)]
            self.emit(f"tt.{fn}({v.name}, axis={axis}{keep})", bound=n)
            return
        ddof = ", ddof=1" if fn in ("var", "std") and self.rng.random() < 0.3 else ""
        self.emit(f"tt.{fn}({v.name}, axis={self._axis(v)}{ddof}{keep})")

    def _scan(self) -> None:
        v = self.pick()
        fn = "cumsum" if self.rng.random() < 0.75 else "cumprod"
        axis = "None" if v.ndim == 0 or self.rng.random() < 0.2 else str(self._int_axis(v))
        self.emit(f"tt.{fn}({v.name}, axis={axis})")

    def _sort(self) -> None:
        v = self.pick()
        axis = "None" if v.ndim == 0 or self.rng.random() < 0.2 else str(self._int_axis(v))
        n = v.ref.size if axis == "None" else v.shape[int(axis)]
        if n > MAX_SORTED_ROW:  # longer rows are sorted in chunks, merged: slow on the simulator, not drawn (seeds)
            return
        if self.rng.random() < 0.5:
            self.emit(f"tt.sort({v.name}, axis={axis})")
        else:
            self.emit(f"tt.argsort({v.name}, axis={axis})", bound=max(1, n))

    # ---- indexing -------------------------------------------------------------------------------
    def _slice_item(self, n: int) -> str:
        r = self.rng.random()
        if r < 0.25 and n > 0:
            return str(int(self.rng.integers(-n, n)))
        if r < 0.4:
            return ":"
        start, stop = (self._choice((None, int(self.rng.integers(-n - 1, n + 2)))) for _ in range(2))
        step = self._choice((None, 1, 2, 3, -1, -2))
        text = f"{'' if start is None else start}:{'' if stop is None else stop}"
        return text + (f":{step}" if step is not None else "")

    def _slice(self) -> None:
        v = self.pick()
        if v.ndim == 0:
            self.emit(f"{v.name}[{self._choice(('None', '...', '..., None'))}]")
            return
        count = int(self.rng.integers(1, v.ndim + 1))
        ellipsis = self.rng.random() < 0.3
        dims = v.shape[-count:] if ellipsis else v.shape[:count]
        items = [self._slice_item(n) for n in dims]
        if self.rng.random() < 0.25:
            items.insert(int(self.rng.integers(0, len(items) + 1)), "None")
        if ellipsis:
            items.insert(0, "...")
        self.emit(f"{v.name}[{', '.join(items)}]")

    def _indices(self, n: int, pred: Any = lambda v: True) -> Value | None:
        """An int value with entries in [0, n): a bounded one of the pool, else `w % n` of an int value."""
        bounded = self.pick(lambda v: v.bound is not None and 0 < v.bound <= n and pred(v))
        if bounded is not None and self.rng.random() < 0.7:
            return bounded
        w = self.pick(lambda v: v.dtype.kind in "iu" and pred(v))
        return None if w is None or n == 0 else self.emit(f"{w.name} % {n}", bound=n)

    def _advanced(self) -> None:
        v = self.pick(lambda v: v.ndim >= 1 and v.ref.size > 0)
        if v is None:
            return
        axis = int(self.rng.integers(0, v.ndim))
        n = v.shape[axis]
        prefix = "..., " if axis == v.ndim - 1 and self.rng.random() < 0.5 else ":, " * axis
        if self.rng.random() < 0.5:
            picks = self.rng.integers(-n, n, size=int(self.rng.integers(1, 6))).tolist()
            self.emit(f"{v.name}[{prefix}{picks}]")
            return
        w = self._indices(n, lambda w: w.ndim <= 2)
        if w is not None:
            self.emit(f"{v.name}[{prefix}{w.name}]")

    def _gather(self) -> None:
        v = self.pick(lambda v: v.ndim >= 1 and v.ref.size > 0)
        if v is None:
            return
        axis = self._int_axis(v)
        if self.rng.random() < 0.3:
            fn = self._choice(("argmax", "argmin"))
            self.emit(f"tt.take_along_axis({v.name}, tt.{fn}({v.name}, axis={axis}, keepdims=True), axis={axis})")
            return
        w = self._indices(v.shape[axis], lambda w: w.ndim == v.ndim)
        if w is not None:
            self.emit(f"tt.take_along_axis({v.name}, {w.name}, axis={axis})")

    # ---- shape ops ------------------------------------------------------------------------------
    def _shape_op(self) -> None:
        v = self.pick()
        nd, rng = v.ndim, self.rng
        op = self._choice(("concatenate", "stack", "split", "flip", "pad", "repeat", "tile", "squeeze", "expand_dims",
                           "moveaxis", "ravel"))  # fmt: skip
        axis = self._int_axis(v) if nd else 0
        if op in ("concatenate", "stack"):
            if op == "concatenate" and nd == 0:
                return
            free = axis % nd if op == "concatenate" else None  # the axis whose lengths may differ
            mate = self.pick(lambda w: w.ndim == nd and all(a == b for i, (a, b) in enumerate(zip(w.shape, v.shape)) if i != free))
            other = mate.name if mate is not None and rng.random() < 0.7 else f"~{v.name}" if v.dtype == np.bool_ else f"-{v.name}"
            at = axis if op == "concatenate" else int(rng.integers(-nd - 1, nd + 1))
            self.emit(f"tt.{op}([{v.name}, {other}], axis={at})")
        elif op == "split" and nd:
            n = v.shape[axis]
            equal = [k for k in (1, 2, 3, 4) if n % k == 0]
            sections = self._choice(equal) if rng.random() < 0.6 else sorted(rng.integers(0, n + 1, size=2).tolist())
            pieces = sections if isinstance(sections, int) else 3
            self.emit(f"tt.split({v.name}, {sections}, axis={axis})[{int(rng.integers(0, pieces))}]")
        elif op == "flip":
            self.emit(f"tt.flip({v.name}{'' if nd == 0 or rng.random() < 0.3 else f', axis={self._axis(v)}'})")
        elif op == "pad":
            pair = lambda: (int(rng.integers(0, 3)), int(rng.integers(0, 3)))  # noqa: E731
            width = int(rng.integers(0, 3)) if rng.random() < 0.4 else tuple(pair() for _ in range(nd))
            value = f", constant_values={self._choice(SCALARS[:5])}" if rng.random() < 0.5 else ""
            self.emit(f"tt.pad({v.name}, {width!r}{value})")
        elif op == "repeat":
            self.emit(f"tt.repeat({v.name}, {int(rng.integers(1, 4))}{f', axis={axis}' if nd and rng.random() < 0.8 else ''})")
        elif op == "tile":
            count = int(rng.integers(1, nd + 2))
            reps = int(rng.integers(1, 3)) if rng.random() < 0.5 else tuple(int(rng.integers(1, 3)) for _ in range(count))
            self.emit(f"tt.tile({v.name}, {reps!r})")
        elif op == "squeeze":
            ones = [i for i, d in enumerate(v.shape) if d == 1]
            self.emit(f"tt.squeeze({v.name}{f', axis={self._choice(ones)}' if ones and rng.random() < 0.5 else ''})")
        elif op == "expand_dims":
            self.emit(f"tt.expand_dims({v.name}, {int(rng.integers(-nd - 1, nd + 1))})")
        elif op == "moveaxis" and nd >= 2:
            src, dst = (int(rng.integers(-nd, nd)) for _ in range(2))
            self.emit(f"tt.moveaxis({v.name}, {src}, {dst})")
        elif op == "ravel":
            self.emit(f"tt.ravel({v.name})")

    # ---- model blocks ---------------------------------------------------------------------------
    def _block(self) -> None:
        v = self.pick(lambda v: v.is_float and v.ndim >= 1 and v.shape[-1] > 0)
        if v is None:
            return
        n = v.shape[-1]
        x = v.name
        block = self._choice(("gelu", "silu", "swiglu", "rope", "layernorm", "cross_entropy", "sampling"))
        if block == "gelu":
            self.emit(f"0.5 * {x} * (1.0 + tt.tanh(0.7978845608028654 * ({x} + 0.044715 * {x} * {x} * {x})))")
        elif block == "silu":
            self.emit(f"{x} * tt.sigmoid({x})" if self.rng.random() < 0.5 else f"{x} / (1.0 + tt.exp(-{x}))")
        elif block == "swiglu" and n % 2 == 0:
            h = n // 2
            if self.rng.random() < 0.5:
                self.emit(f"{x}[..., :{h}] * tt.sigmoid({x}[..., :{h}]) * {x}[..., {h}:]")
                return
            gate, up = self.emit(f"tt.split({x}, 2, axis=-1)[0]"), self.emit(f"tt.split({x}, 2, axis=-1)[1]")
            if gate is not None and up is not None:
                self.emit(f"{gate.name} * tt.sigmoid({gate.name}) * {up.name}")
        elif block == "rope" and n % 2 == 0:
            h = n // 2
            angle = self.pick(lambda w: w.is_float and w.name != x and _broadcasts(w.shape, v.shape))
            theta = angle.name if angle is not None else f"({x} * 0.5)"
            self.emit(f"tt.concatenate([-{x}[..., {h}:], {x}[..., :{h}]], -1) * tt.sin({theta}) + {x} * tt.cos({theta})")
        elif block == "layernorm":
            scale = f" * {self._choice(('0.5', '2.0'))} + {self._choice(('0.1', '-1.0'))}" if self.rng.random() < 0.5 else ""
            self.emit(f"({x} - tt.mean({x}, axis=-1, keepdims=True)) / tt.sqrt(tt.var({x}, axis=-1, keepdims=True) + 1e-5){scale}")
        elif block == "cross_entropy":
            logp = self.emit(f"{x} - tt.logsumexp({x}, axis=-1, keepdims=True)")
            targets = self._indices(n, lambda w: w.ndim == v.ndim and w.shape[-1] == 1 and _broadcasts(w.shape, v.shape))
            if logp is not None and targets is not None:
                self.emit(f"-tt.mean(tt.take_along_axis({logp.name}, {targets.name}, axis=-1))")
        elif block == "sampling":
            probs = self.emit(f"tt.exp({x} - tt.logsumexp({x}, axis=-1, keepdims=True))")
            if probs is not None:
                cdf = self.emit(f"tt.cumsum({probs.name}, axis=-1)")
                if cdf is not None:
                    self.emit(f"tt.sum({cdf.name} < {self._choice(('0.5', '0.9', '0.25'))}, axis=-1)", bound=n + 1)


def _broadcasts(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    """`a` broadcasts to `b` (b's shape is the result)."""
    return len(a) <= len(b) and all(x == y or x == 1 for x, y in zip(reversed(a), reversed(b)))
