"""Array-program-only reductions with NumPy's (and scipy's) names: `prod`, `var`, `std`, `any`, `all`,
`logsumexp`, `take_along_axis`, `argsort`, `searchsorted`, `median`, `quantile`, `percentile`, their `nan*` forms,
`partition`, `argpartition` (implemented by the tracer, tinyton/frontend/array_reductions.py, array_sorting.py and
array_order_statistics.py; kernels write them with `tt.reduce`, `tt.sum` or `tt.sort` of a tile)."""

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
median = _array_only(
    "median", "NumPy's median: `tt.median(x, axis=None, keepdims=False)`, NaN for a row holding a NaN."
)
nanmedian = _array_only("nanmedian", "NumPy's nanmedian: `tt.nanmedian(x, axis=None, keepdims=False)`.")
quantile = _array_only(
    "quantile", "NumPy's quantile: `tt.quantile(x, q, axis=None, method='linear', keepdims=False)`, q a constant."
)
percentile = _array_only(
    "percentile", "NumPy's percentile: `tt.percentile(x, q, axis=None, method='linear', keepdims=False)`."
)
nanquantile = _array_only("nanquantile", "NumPy's nanquantile: `tt.nanquantile(x, q, axis=None, ...)`.")
nanpercentile = _array_only("nanpercentile", "NumPy's nanpercentile: `tt.nanpercentile(x, q, axis=None, ...)`.")
partition = _array_only("partition", "NumPy's partition: `tt.partition(x, kth, axis=-1)` (the sorted row).")
argpartition = _array_only(
    "argpartition", "NumPy's argpartition: `tt.argpartition(x, kth, axis=-1)` (the stable argsort)."
)
