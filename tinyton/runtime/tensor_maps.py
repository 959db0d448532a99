"""TMA tensor maps (`CUtensorMap`) of a launch, encoded from its parameter values and cached.

A kernel whose descriptor loads the lowering turned into TMA copies takes, after its own parameters, one
pointer per tensor map. Each map is described by a spec (`KernelInfo.tensor_maps`, kept in the disk cache
with the PTX): which parameter is the base pointer, and the sizes and element strides of the tensor
(outermost first) as constants or as parameter references (`"p3"`), the box (the block, or one
128-byte-wide panel of it), the element type, the padding and the swizzle. At launch the map is encoded
with `cuTensorMapEncodeTiled` and uploaded to 128 bytes of global memory once per (address, sizes, strides,
box, dtype, padding, swizzle); a cached launch only looks the key up.

The upload is an asynchronous copy on the launch's own stream, from a pinned host slot that stays put, into a
slot of a per-device slab allocated once: ordered before the kernel that reads it, and legal inside a CUDA
graph capture (torch's `torch.cuda.graph` forbids allocations and synchronous copies there), where it becomes
a copy node of the graph.

Global memory rather than a `__grid_constant__` by-value parameter: the kernel parameter stays a plain
pointer on both PTX paths (xDSL's `llvm.func` carries no `byval`/`nvvm.grid_constant` parameter
attributes), the launcher's fixed parameter record is unchanged, and a cached map costs no copy per launch.
The descriptor cache of the SM keeps the map after its first use, so TMA reads it from global memory once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from tinyton.dtypes import dtype_of
from tinyton.runtime import device_memory, driver

MAX_CACHED = 4096
"""Maps kept on the device before the cache is emptied (each is 128 bytes)."""

_DATA_TYPES = {
    "float16": "FLOAT16", "bfloat16": "BFLOAT16", "float32": "FLOAT32", "float64": "FLOAT64",
    "int32": "INT32", "int64": "INT64", "uint8": "UINT8", "int8": "UINT8", "uint16": "UINT16",
    "int16": "UINT16", "uint32": "UINT32", "uint64": "UINT64", "float8e4nv": "UINT8", "float8e5": "UINT8",
}
"""tinyton element type -> `CU_TENSOR_MAP_DATA_TYPE_*` (TMA copies bytes: signedness does not matter)."""

_SWIZZLES = {0: "NONE", 32: "32B", 64: "64B", 128: "128B"}

_cache: dict[tuple, int] = {}
MAP_BYTES = 128


class _Slab:
    """`MAX_CACHED` map slots of one device, and their pinned host twins (written once, never moved)."""

    def __init__(self) -> None:
        self.device = device_memory.alloc(MAX_CACHED * MAP_BYTES)
        self.host = device_memory.pinned(MAX_CACHED * MAP_BYTES // 8, np.uint64)
        self.used = 0

    def upload(self, words: np.ndarray, stream: int) -> int:
        slot = self.used
        self.used += 1
        self.host[slot * 16 : (slot + 1) * 16] = words
        address = self.device + slot * MAP_BYTES
        device_memory.memcpy_htod(address, self.host[slot * 16 : (slot + 1) * 16], stream)
        return address


_slabs: dict[int, _Slab] = {}


def key_function(spec: Mapping[str, Any]) -> Callable[[Sequence[Any]], tuple]:
    """`values -> key` of `spec`'s map: the base address, sizes, strides and the spec's constants, as one
    generated expression (a cached launch computes it every time: no per-entry dispatch)."""
    def term(entry: int | str) -> str:
        return f"int(v[{int(entry[1:])}])" if isinstance(entry, str) else repr(int(entry))

    def dims(entries: Sequence[int | str]) -> str:
        return "(" + "".join(f"{term(e)}, " for e in entries) + ")"

    constants = (tuple(spec["box"]), spec["dtype"], spec["padding"], spec["swizzle"])
    source = (f"lambda v: (int(v[{int(spec['base'])}]), {dims(spec['shape'])}, {dims(spec['strides'])}, "
              f"*{constants!r})")
    return eval(source)  # noqa: S307 - built from ints and the spec's constants only


def tensor_map_key(spec: Mapping[str, Any], values: Sequence[Any]) -> tuple:
    """What the encoded map depends on: the base address, sizes, strides and the spec's constants."""
    return key_function(spec)(values)


def check_tensor_map(key: tuple, itemsize: int) -> None:
    """Refuse, with what TMA requires, a tensor it cannot describe (Triton's TensorDescriptor asks the same)."""
    address, shape, strides, box = key[:4]
    problems = []
    if address % 16:
        problems.append(f"its base address {address:#x} must be a multiple of 16 bytes")
    if strides[-1] != 1:
        problems.append(f"its last stride must be 1, got {strides[-1]}")
    if any(s * itemsize % 16 or s <= 0 for s in strides[:-1]):
        problems.append(f"every other stride must be a positive multiple of 16 bytes, got strides {list(strides)}")
    if any(not 0 < d < 1 << 32 for d in shape):
        problems.append(f"every size must be 1 to 2**32, got shape {list(shape)}")
    if problems:
        raise ValueError(f"a tensor descriptor read with TMA (shape {list(shape)}, block {list(box)}): " + "; ".join(problems))


def encode(key: tuple) -> np.ndarray:
    """The 128-byte `CUtensorMap` of `key` (see `tensor_map_key`)."""
    address, shape, strides, box, dtype, padding, swizzle = key
    itemsize = np.dtype(dtype_of(dtype).np).itemsize
    check_tensor_map(key, itemsize)
    drv = driver.driver_api()
    rank = len(shape)
    cu64, cu32 = drv.cuuint64_t, drv.cuuint32_t
    fill = drv.CUtensorMapFloatOOBfill
    tensor_map = driver.call(
        drv.cuTensorMapEncodeTiled,
        getattr(drv.CUtensorMapDataType, f"CU_TENSOR_MAP_DATA_TYPE_{_DATA_TYPES[dtype]}"),
        rank,
        address,
        [cu64(d) for d in reversed(shape)],
        [cu64(s * itemsize) for s in reversed(strides[:-1])],
        [cu32(b) for b in reversed(box)],
        [cu32(1)] * rank,
        drv.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
        getattr(drv.CUtensorMapSwizzle, f"CU_TENSOR_MAP_SWIZZLE_{_SWIZZLES[swizzle]}"),
        drv.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
        fill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA if padding == "nan" else fill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
    )
    return np.array([int(w) for w in tensor_map.opaque], dtype=np.uint64)


class DeviceTensorMap:
    """`(values, stream) -> address`: the device address of `spec`'s map for a launch with parameter `values`
    on `stream` (encoded and uploaded on that stream on first use)."""

    def __init__(self, spec: Mapping[str, Any]) -> None:
        self.key = key_function(spec)

    def __call__(self, values: Sequence[Any], stream: int = 0) -> int:
        key = self.key(values)
        found = _cache.get(key)
        if found is None:
            ordinal = driver.active_ordinal()
            slab = _slabs.get(ordinal)
            if slab is None:
                slab = _slabs[ordinal] = _Slab()
            if slab.used == MAX_CACHED:
                clear()
            found = _cache[key] = slab.upload(encode(key), stream)
        return found


def clear() -> None:
    """Forget every cached map (after the launches that may read them are done): their slots are reused."""
    for ordinal, slab in _slabs.items():
        if slab.used:
            driver.synchronize(ordinal)
        slab.used = 0
    _cache.clear()
