"""The kernel cache: memory and disk layers, atomic writes, corrupt entries."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tinyton.runtime.cache import CacheEntry, KernelCache, cache_key

ENTRY = CacheEntry(
    name="vadd4",
    ptx=".version 8.0\n.target sm_90\n// kernel body\n",
    num_warps=4,
    shared_bytes=64,
    param_kinds=("ptr", "ptr", "ptr", "i4"),
    extra={"block": [128, 1, 1]},
)
KEY = cache_key("def vadd(a, b, c, n): ...", ("f32", "f32", "f32", "i32"), "llvmlite", "sm_90")


def files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.rglob("*") if p.is_file())


def test_round_trip_through_disk(tmp_path: Path):
    KernelCache(tmp_path, disk=True).put(KEY, ENTRY)
    assert [p.suffix for p in files(tmp_path)] == [".json", ".ptx"]
    assert KernelCache(tmp_path, disk=True).get(KEY) == ENTRY


def test_key_covers_every_input():
    keys = {
        KEY,
        cache_key("def vadd(a, b, c, n): pass", ("f32", "f32", "f32", "i32"), "llvmlite", "sm_90"),
        cache_key("def vadd(a, b, c, n): ...", ("f16", "f32", "f32", "i32"), "llvmlite", "sm_90"),
        cache_key("def vadd(a, b, c, n): ...", ("f32", "f32", "f32", "i32"), "mlir", "sm_90"),
        cache_key("def vadd(a, b, c, n): ...", ("f32", "f32", "f32", "i32"), "llvmlite", "sm_80"),
    }
    assert len(keys) == 5


def test_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("TINYTON_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("TINYTON_CACHE", "0")
    cache = KernelCache()
    cache.put(KEY, ENTRY)
    assert cache.get(KEY) == ENTRY  # memory layer still works
    assert files(tmp_path) == []
    monkeypatch.setenv("TINYTON_CACHE", "1")
    KernelCache().put(KEY, ENTRY)
    assert KernelCache().get(KEY) == ENTRY


def test_failed_write_keeps_old_entry_and_no_temp_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    KernelCache(tmp_path).put(KEY, ENTRY)
    before = {p: p.read_bytes() for p in files(tmp_path)}

    def crash(src: str, dst: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", crash)
    newer = CacheEntry("vadd4", ENTRY.ptx + "// v2\n", 8, 0, ENTRY.param_kinds)
    cache = KernelCache(tmp_path)
    cache.put(KEY, newer)  # disk errors are swallowed...
    assert cache.get(KEY) == newer  # ...the entry lives in memory
    monkeypatch.undo()
    assert {p: p.read_bytes() for p in files(tmp_path)} == before
    assert KernelCache(tmp_path).get(KEY) == ENTRY


@pytest.mark.parametrize(
    "corrupt",
    [
        pytest.param(lambda ptx, meta: ptx.write_bytes(ptx.read_bytes()[:10]), id="truncated-ptx"),
        pytest.param(
            lambda ptx, meta: ptx.write_bytes(ptx.read_bytes().replace(b"body", b"BODY")),
            id="same-size-ptx",
        ),
        pytest.param(lambda ptx, meta: ptx.unlink(), id="missing-ptx"),
        pytest.param(
            lambda ptx, meta: meta.write_bytes(meta.read_bytes()[:-7]), id="truncated-json"
        ),
        pytest.param(lambda ptx, meta: meta.write_bytes(b"\xff\xfe"), id="binary-json"),
        pytest.param(lambda ptx, meta: meta.write_text("[]"), id="wrong-json"),
    ],
)
def test_corrupt_entry_is_ignored_then_replaced(tmp_path: Path, corrupt):
    KernelCache(tmp_path).put(KEY, ENTRY)
    [meta, ptx] = files(tmp_path)
    corrupt(ptx, meta)
    cache = KernelCache(tmp_path)
    assert cache.get(KEY) is None  # recompile...
    cache.put(KEY, ENTRY)  # ...and store again
    assert KernelCache(tmp_path).get(KEY) == ENTRY


def test_unwritable_directory_is_not_an_error(tmp_path: Path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    cache = KernelCache(blocker)
    cache.put(KEY, ENTRY)
    assert cache.get(KEY) == ENTRY
