"""Import an example's modules (examples/NAME/*.py import each other by bare names: `from model import ...`)
without leaving those names in `sys.modules`, where another example's `model` or `generate` would find them."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def import_example(folder: str, *names: str, also: tuple[str, ...] = ()) -> list[ModuleType]:
    """The modules `names` of examples/`folder` (and, on the path while they import, the folders `also`)."""
    paths = [str(EXAMPLES / f) for f in (folder, *also)]
    local = {p.stem for f in (folder, *also) for p in (EXAMPLES / f).glob("*.py")}
    saved = {n: sys.modules.pop(n) for n in list(sys.modules) if n in local}
    sys.path[:0] = paths
    try:
        return [importlib.import_module(n) for n in names]
    finally:
        del sys.path[: len(paths)]
        for n in local:
            sys.modules.pop(n, None)
        sys.modules.update(saved)
