"""Array-program-only reductions with NumPy's (and scipy's) names: `prod`, `var`, `std`, `any`, `all`,
`logsumexp`, `take_along_axis`, `argsort`, `searchsorted` (implemented by the tracer,
tinyton/frontend/array_reductions.py and array_sorting.py; kernels write them with `tt.reduce`, `tt.sum` or
`tt.sort` of a tile)."""

from __future__ import annotations

from tinyton.language.core import _array_only

prod = _array_only("prod", "NumPy's prod: `tt.prod(x, axis=None, dtype=None, keepdims=False)`.")
var = _array_only("var", "NumPy's var: `tt.var(x, axis=None, dtype=None, ddof=0, keepdims=False)`.")
std = _array_only("std", "NumPy's std: `tt.std(x, axis=None, dtype=None, ddof=0, keepdims=False)`.")
any = _array_only("any", "NumPy's any: `tt.any(x, axis=None, keepdims=False)` (nonzero counts as true).")
all = _array_only("all", "NumPy's all: `tt.all(x, axis=None, keepdims=False)` (nonzero counts as true).")
logsumexp = _array_only("logsumexp", "scipy's logsumexp: `tt.logsumexp(x, axis=None, keepdims=False)`, max-shifted.")
take_along_axis = _array_only(
    "take_along_axis", "NumPy's take_along_axis: `tt.take_along_axis(arr, indices, axis=-1)`."
)
argsort = _array_only(
    "argsort", "NumPy's argsort: `tt.argsort(x, axis=-1)`, int64 indices, equal values in index order (stable)."
)
searchsorted = _array_only(
    "searchsorted", "NumPy's searchsorted: `tt.searchsorted(a, v, side='left', sorter=None)` of a sorted 1-d `a`."
)
