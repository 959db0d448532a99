"""Array-program builtins for NumPy's indexing, joining and reshaping functions (no tile-level
equivalent): `tt.concatenate`, `tt.stack`, `tt.pad`, ... (tinyton/frontend/array_indexing.py)."""

from __future__ import annotations

from tinyton.language.core import _array_only

concatenate = _array_only("concatenate", "NumPy's concatenate: join arrays along an axis (`axis=None` flattens).")
stack = _array_only("stack", "NumPy's stack: join arrays of one shape along a new axis.")
array_split = _array_only("array_split", "NumPy's array_split: like split, sections need not divide the axis.")
flip = _array_only("flip", "NumPy's flip: reverse the order along axis (int, tuple or None).")
squeeze = _array_only("squeeze", "NumPy's squeeze: remove size-1 dims (all, or those of axis).")
moveaxis = _array_only("moveaxis", "NumPy's moveaxis: move axes to new positions.")
ravel = _array_only("ravel", "NumPy's ravel: the elements as a 1-D array.")
repeat = _array_only("repeat", "NumPy's repeat: repeat elements (int or constant per-element counts) along axis.")
tile = _array_only("tile", "NumPy's tile: repeat the whole array along each axis.")
pad = _array_only("pad", "NumPy's pad with mode='constant' (pad_width and constant_values in NumPy's forms).")
