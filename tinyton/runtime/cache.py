"""
Compiled-kernel cache, in memory and on disk.

An entry is the PTX text and JSON metadata, stored as `<dir>/<key[:2]>/<key>.{ptx,json}`.
Small JSON records (autotuning results, `get_record`/`put_record`) live in `<dir>/<kind>/<key>.json`.
Both files are written atomically (temporary file + `os.replace`), the metadata last,
and the metadata records the PTX's size and sha256: a truncated, corrupted or half
written entry is therefore never trusted, only ignored (and overwritten by the next
`put`). Disk errors never fail a compilation; the entry then lives in memory only.

`TINYTON_CACHE_DIR` picks the directory (default `~/.cache/tinyton`), and
`TINYTON_CACHE=0` disables the disk layer.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import asdict, dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

_FORMAT = 1


@dataclass(frozen=True)
class CacheEntry:
    """A compiled kernel: PTX plus what the launcher needs to run it."""

    name: str
    ptx: str
    num_warps: int
    shared_bytes: int
    param_kinds: tuple[str, ...]
    extra: dict[str, Any] = field(default_factory=dict)
    """Anything else the compiler wants back (must be JSON-serializable)."""


@cache
def tinyton_version() -> str:
    """A hash of the compiler's own sources: an edited lowering (a development checkout) must never be served
    PTX that an older lowering produced. (It identifies a release as well as its version number would,
    without loading importlib.metadata on every cold start. os.walk and plain strings, not pathlib's rglob:
    a fifth of the time, which every fresh process's first compile or cache hit pays.)"""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    names = []
    for root, folders, files in os.walk(package):
        folders[:] = [f for f in folders if f != "__pycache__"]
        prefix = os.path.relpath(root, package).replace(os.sep, "/") + "/"
        names += [prefix.removeprefix("./") + f for f in files if f.endswith((".py", ".pdl.mlir"))]
    digest = hashlib.sha256()
    for name in sorted(names):
        digest.update(name.encode())
        with open(os.path.join(package, name), "rb") as source:
            digest.update(source.read())
    return digest.hexdigest()[:16]


def cache_key(source: str, specialization: object, toolchain: str, arch: str) -> str:
    """
    sha256 over everything that changes the PTX.

    `specialization` must have a deterministic `repr` (tuples of str/int/bool do).
    """
    payload = json.dumps([source, tinyton_version(), repr(specialization), toolchain, arch])
    return hashlib.sha256(payload.encode()).hexdigest()


class KernelCache:
    def __init__(self, directory: str | Path | None = None, *, disk: bool | None = None):
        default = os.environ.get("TINYTON_CACHE_DIR") or "~/.cache/tinyton"
        self.directory = Path(directory or default).expanduser()
        self.disk = os.environ.get("TINYTON_CACHE", "1") != "0" if disk is None else disk
        self._memory: dict[str, Any] = {}  # key -> CacheEntry; "kind/key" -> record

    def get(self, key: str) -> CacheEntry | None:
        entry = self._memory.get(key)
        if entry is None and self.disk:
            entry = self._load(key)
            if entry is not None:
                self._memory[key] = entry
        return entry

    def put(self, key: str, entry: CacheEntry) -> None:
        self._memory[key] = entry
        if self.disk:
            try:
                self._store(key, entry)
            except OSError:
                pass

    def get_record(self, kind: str, key: str) -> Any:
        """A small JSON record (e.g. an autotuning result) stored under `kind`, or None."""
        record = self._memory.get(f"{kind}/{key}")
        if record is None and self.disk:
            try:
                record = json.loads((self.directory / kind / f"{key}.json").read_text())["value"]
            except (OSError, ValueError, KeyError, TypeError):
                return None
            self._memory[f"{kind}/{key}"] = record
        return record

    def put_record(self, kind: str, key: str, value: Any) -> None:
        """Remember a JSON-serializable `value` (in memory, and on disk unless it is off)."""
        self._memory[f"{kind}/{key}"] = value
        if self.disk:
            path = self.directory / kind / f"{key}.json"
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                _write_atomic(path, json.dumps({"value": value}).encode())
            except OSError:
                pass

    def _paths(self, key: str) -> tuple[Path, Path]:
        base = self.directory / key[:2] / key
        return base.with_suffix(".ptx"), base.with_suffix(".json")

    def _load(self, key: str) -> CacheEntry | None:
        ptx_path, meta_path = self._paths(key)
        try:
            meta = json.loads(meta_path.read_text())
            ptx = ptx_path.read_bytes()
            if (
                meta["format"] != _FORMAT
                or meta["key"] != key
                or meta["ptx_bytes"] != len(ptx)
                or meta["ptx_sha256"] != hashlib.sha256(ptx).hexdigest()
            ):
                return None
            fields = meta["entry"]
            return CacheEntry(
                name=fields["name"],
                ptx=ptx.decode(),
                num_warps=fields["num_warps"],
                shared_bytes=fields["shared_bytes"],
                param_kinds=tuple(fields["param_kinds"]),
                extra=fields["extra"],
            )
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def _store(self, key: str, entry: CacheEntry) -> None:
        ptx_path, meta_path = self._paths(key)
        ptx = entry.ptx.encode()
        fields = asdict(entry)
        del fields["ptx"]
        meta = {
            "format": _FORMAT,
            "key": key,
            "ptx_bytes": len(ptx),
            "ptx_sha256": hashlib.sha256(ptx).hexdigest(),
            "entry": fields,
        }
        ptx_path.parent.mkdir(parents=True, exist_ok=True)
        _write_atomic(ptx_path, ptx)
        _write_atomic(meta_path, json.dumps(meta, indent=1).encode())


def _write_atomic(path: Path, data: bytes) -> None:
    """Readers see the old file or the new one, never a partial write."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@cache
def default_cache() -> KernelCache:
    """The process-wide cache, configured from the environment on first use."""
    return KernelCache()
