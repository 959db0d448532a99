"""What the backend did with a model: the ops that ran in torch and why, the tinyton groups and their kernels."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Group:
    """One tinyton partition of a graph: its ATen ops and, once called, the compiled program(s)."""

    graph: str
    """"forward", "backward" or "inference"."""
    ops: list[str]
    programs: dict[Any, Any] = field(default_factory=dict)
    """Call signature -> the ArrayProgram compiled for it."""
    last: Any = None
    """The program of the last call."""


@dataclass
class Report:
    """Filled while the backend compiles and runs: read through `tinyton.torch.explain`."""

    fallbacks: dict[str, str] = field(default_factory=dict)
    """ATen op name -> why it ran in torch (the first reason seen)."""
    groups: list[Group] = field(default_factory=list)

    def fall_back(self, op: str, reason: str) -> None:
        self.fallbacks.setdefault(op, reason)
