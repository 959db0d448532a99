"""The condensed graph of fusion groups, kept acyclic under merges in time local to each merge.

Merging groups a and b closes a cycle iff a path leaves one and re-enters the other through a third group.
A search for that path from scratch may walk the whole program (quadratic over a planner's many merges),
so the graph keeps a topological order of its groups (initially program order) and only searches
between the two groups' places in it; a merge then re-places just the groups found between them
(Pearce and Kelly's dynamic topological order).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import TypeVar

N = TypeVar("N", bound=Hashable)


class CycleError(ValueError):
    """The graph has a cycle, so there is no topological order."""


class GroupGraph:
    """A DAG over group ids; `order` is a topological numbering maintained by `merge`."""

    def __init__(self, nodes: Sequence[int], edges: Iterable[tuple[int, int]]):
        """`nodes` in a topological order (program order), `edges` between them."""
        self.succ: dict[int, set[int]] = {n: set() for n in nodes}
        self.pred: dict[int, set[int]] = {n: set() for n in nodes}
        self.order: dict[int, int] = {n: i for i, n in enumerate(nodes)}
        for u, v in edges:
            if u != v:
                self.succ[u].add(v)
                self.pred[v].add(u)

    def _between(self, start: int, stop: int, step: dict[int, set[int]], inside: Callable[[int], bool]) -> set[int] | None:
        """Groups reached from `start` (its direct edge to `stop` aside) through groups with `inside(order)`;
        None if `stop` is among them."""
        seen: set[int] = set()
        stack = [n for n in step[start] if n != stop]
        while stack:
            n = stack.pop()
            if n in seen:
                continue
            if n == stop:
                return None
            if inside(self.order[n]):
                seen.add(n)
                stack.extend(step[n])
        return seen

    def _forward(self, first: int, last: int) -> set[int] | None:
        limit = self.order[last]
        return self._between(first, last, self.succ, lambda o: o < limit)

    def creates_cycle(self, a: int, b: int) -> bool:
        """Would merging a and b close a cycle? (A path between them runs within their span of `order`.)"""
        first, last = sorted((a, b), key=self.order.__getitem__)
        return self._forward(first, last) is None

    def merge(self, keep: int, gone: int) -> None:
        """Contract `gone` into `keep` (the merge must not close a cycle) and repair `order`."""
        first, last = sorted((keep, gone), key=self.order.__getitem__)
        after = self._forward(first, last)
        low = self.order[first]
        before = self._between(last, first, self.pred, lambda o: o > low)
        if after is None or before is None:
            raise CycleError(f"merging groups {keep} and {gone} closes a cycle")
        # Groups that reach `last` go before the merged group, groups reached from `first` after it.
        slots = sorted(self.order[n] for n in (*before, *after, first, last))
        placed = [*sorted(before, key=self.order.__getitem__), keep, *sorted(after, key=self.order.__getitem__)]
        for s in self.succ.pop(gone):
            self.pred[s].discard(gone)
            if s != keep:
                self.succ[keep].add(s)
                self.pred[s].add(keep)
        for p in self.pred.pop(gone):
            self.succ[p].discard(gone)
            if p != keep:
                self.pred[keep].add(p)
                self.succ[p].add(keep)
        del self.order[gone]
        for n, slot in zip(placed, slots):
            self.order[n] = slot

    def sorted(self, key: Callable[[int], object]) -> list[int]:
        """The groups in topological order, ties broken by the smallest `key`."""
        return lexicographic_order(self.succ, key)


def lexicographic_order(succ: Mapping[N, Iterable[N]], key: Callable[[N], object]) -> list[N]:
    """A topological order of the graph `succ` (node -> successors); among ready nodes, the smallest
    `key` first (networkx's lexicographical_topological_sort, without importing networkx)."""
    indegree: dict[N, int] = dict.fromkeys(succ, 0)
    for n in succ:
        for s in succ[n]:
            indegree[s] += 1
    ready = [(key(n), i, n) for i, n in enumerate(succ) if indegree[n] == 0]
    heapq.heapify(ready)
    ids = {n: i for i, n in enumerate(succ)}
    out: list[N] = []
    while ready:
        n = heapq.heappop(ready)[2]
        out.append(n)
        for s in succ[n]:
            indegree[s] -= 1
            if indegree[s] == 0:
                heapq.heappush(ready, (key(s), ids[s], s))
    if len(out) != len(indegree):
        raise CycleError("the group graph has a cycle")
    return out


class Reachability:
    """Which of some `targets` each group reaches, as bitmasks: many cycle checks between targets in
    O(degree) each. (A bounded search costs the distance between the two groups, and sibling candidates,
    readers of one input, may lie far apart.) Kept exact across `merged` calls."""

    def __init__(self, graph: GroupGraph, targets: Iterable[int]):
        self.graph = graph
        self.bits = {g: 1 << i for i, g in enumerate(dict.fromkeys(targets))}
        self.reach: dict[int, int] = {}
        for n in sorted(graph.order, key=graph.order.__getitem__, reverse=True):
            r = 0
            for s in graph.succ[n]:
                r |= self.reach[s] | self.bits.get(s, 0)
            self.reach[n] = r

    def _around(self, a: int, b: int) -> bool:
        """Is there a path a -> c -> ... -> b with c != b?"""
        bits = self.bits[b]
        return any(self.reach[c] & bits for c in self.graph.succ[a] if c != b)

    def creates_cycle(self, a: int, b: int) -> bool:
        return self._around(a, b) or self._around(b, a)

    def merged(self, keep: int, gone: int) -> None:
        """Update after `graph.merge(keep, gone)` of two targets: whatever reached either reaches both's
        descendants now."""
        mask = self.bits.pop(gone) | self.bits[keep]
        self.bits[keep] = mask
        below = self.reach.pop(gone) | self.reach[keep]
        self.reach[keep] = below
        for n, r in self.reach.items():
            if r & mask:
                self.reach[n] = r | below
