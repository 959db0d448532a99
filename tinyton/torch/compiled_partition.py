"""One tinyton partition of an ATen graph at run time: traced, fused and compiled per call signature.

The signature is what the traced program is specialised on: each tensor's shape, dtype and device, and the
value of each int (symbolic sizes of a dynamic graph), so a new batch size or sequence length compiles a new
variant and nothing stale is reused. int64 inputs are passed as int32 where array programs have no int64,
and results are given back in torch's dtypes. If tinyton cannot compile or run a signature (a
CompilationError from fusion or codegen), its calls run the partition in torch, and explain says why.

Views are never copied. An output that is a view (a weight's transpose, a reshaped activation: what AOTAutograd
saves for the backward) is made by torch's view ops on the input or the program's result it views, as eager
makes it. An input that is a permutation of a contiguous tensor (that transpose, arriving in the backward) is
passed as the contiguous tensor and permuted back inside the program, where a view costs nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import torch
from torch.fx import GraphModule, Node
from torch.fx.node import map_arg

from tinyton.compiler import build_program
from tinyton.frontend.tracing import trace
from tinyton.runtime.torch_interop import from_host
from tinyton.torch.common import array_dtype
from tinyton.torch.interpret import run_graph
from tinyton.torch.report import Group, Report
from tinyton.torch.rules import ALIASING

_MISSING = object()


def _view_chain(node: Node) -> tuple[Node, list[Node]]:
    """The value `node` is a view of, and the chain of ALIASING ops (in order) that makes it from that value: empty
    when `node` is no view, or when a view's other arguments (sizes of a dynamic graph) are computed."""
    chain, base = [], node
    while base.op == "call_function" and base.target in ALIASING and isinstance(base.args[0], Node):
        if any(a.op != "placeholder" for a in base.all_input_nodes if a is not base.args[0]):
            break
        chain.append(base)
        base = base.args[0]
    return base, chain[::-1]


def _key(args: Sequence[Any]) -> tuple[Any, ...]:
    """The call signature (`get_device()`: the device's index, -1 for the CPU, without making a device object;
    a non-contiguous tensor's strides, which decide how it is passed: `_permutations`)."""
    return tuple([((a.shape, a.dtype, a.get_device()) if a.is_contiguous() else (a.shape, a.dtype, a.get_device(),
                   a.stride())) if isinstance(a, torch.Tensor) else (type(a), a) for a in args])


def _permutations(args: Sequence[Any]) -> dict[int, tuple[int, ...]]:
    """Per non-contiguous tensor argument that is a permutation of a contiguous tensor (a saved weight's
    transpose), the order of its dims that makes it that contiguous tensor."""
    out = {}
    for i, a in enumerate(args):
        if isinstance(a, torch.Tensor) and not a.is_contiguous():
            order = tuple(sorted(range(a.dim()), key=lambda d: (-a.stride(d), d)))
            if a.permute(order).is_contiguous():
                out[i] = order
    return out


def _permuted(args: Sequence[Any], permutations: dict[int, tuple[int, ...]]) -> list[Any]:
    """`args` with each permuted tensor as its contiguous tensor (a view: nothing is copied)."""
    args = list(args)
    for i, order in permutations.items():
        args[i] = args[i].permute(order)
    return args


def _restored(args: Sequence[Any], permutations: dict[int, tuple[int, ...]]) -> list[Any]:
    """Traced `args` with each permuted one transposed back to the layout the graph was written for."""
    args = list(args)
    for i, order in permutations.items():
        args[i] = args[i].transpose(tuple(order.index(d) for d in range(len(order))))
    return args


def _conversions(args: Sequence[Any]) -> dict[int, tuple[torch.device, torch.dtype]]:
    """The (device, dtype) each tensor argument that a program cannot take as it is must become: int64 as
    int32 where array programs have no int64 (indices, positions, token ids); a CPU tensor (a scalar torch keeps
    on the host) on the GPU with the CUDA ones, since a program runs on one device."""
    narrow = array_dtype(torch.int64) != np.int64
    device = next((a.device for a in args if isinstance(a, torch.Tensor) and a.is_cuda), None)
    out = {}
    for i, a in enumerate(args):
        if isinstance(a, torch.Tensor):
            target = (device or a.device, torch.int32 if narrow and a.dtype == torch.int64 else a.dtype)
            if target != (a.device, a.dtype):
                out[i] = target
    return out


def _narrowed(args: Sequence[Any], conversions: dict[int, tuple[torch.device, torch.dtype]]) -> list[Any]:
    """`args` with `conversions` applied."""
    args = list(args)
    for i, (device, dtype) in conversions.items():
        args[i] = args[i].to(device=device, dtype=dtype)
    return args


class _Variant:
    """One call signature's program, and the conversions around its calls, decided on its first call: which
    arguments must change device or dtype (`_conversions`), which results are not yet torch tensors of the
    graph's device and dtype, and which alias an input (a program may return an input: `clone` is the
    identity in array programs, a contiguous reshape shares its buffer; the graph's outputs are new tensors).
    The signature fixes all three, and the program's runner (its allocations and launches for these argument
    types and devices), so later calls convert only those and go straight to the runner (a single op's call is
    host-bound: every microsecond of it counts)."""

    def __init__(self, program: Any, permutations: dict[int, tuple[int, ...]],
                 conversions: dict[int, tuple[torch.device, torch.dtype]], expected: Sequence[Any]) -> None:
        self.program, self.permutations, self.conversions, self.expected = program, permutations, conversions, expected
        self.fixed: list[int] = []
        self.aliased: list[int] = []
        self.run: Callable[[Sequence[Any]], Any] | None = None

    def first_call(self, args: Sequence[Any], inputs: Sequence[Any]) -> list[Any]:
        """The first call, on `args` as given and as narrowed (`inputs`), deciding the conversions."""
        self.run = self.program.runner(inputs)
        raw = list(self.run(inputs))
        results = [_as_expected(r, e) for r, e in zip(raw, self.expected)]
        self.fixed = [i for i, (r, converted) in enumerate(zip(raw, results)) if converted is not r]
        inputs = {a.untyped_storage().data_ptr() for a in args if isinstance(a, torch.Tensor)}
        self.aliased = [i for i, r in enumerate(results) if r.untyped_storage().data_ptr() in inputs]
        return self._fresh(results)

    def __call__(self, args: Sequence[Any]) -> list[Any]:
        inputs = _permuted(args, self.permutations) if self.permutations else args
        results = list(self.run(_narrowed(inputs, self.conversions) if self.conversions else inputs))
        for i in self.fixed:
            results[i] = _as_expected(results[i], self.expected[i])
        return self._fresh(results)

    def _fresh(self, results: list[Any]) -> list[Any]:
        for i in self.aliased:
            results[i] = results[i].clone()
        return results


class CompiledPartition:
    """Calls the partition `gm` as tinyton array programs (one per signature), or in torch where tinyton cannot.

    A plain callable, not an `nn.Module`: the outer graph calls it as an attribute (`self.tinyton_0(...)`), and a
    module's `__call__` (hooks, forward dispatch) would cost every call microseconds for nothing."""

    def __init__(self, gm: GraphModule, group: Group, report: Report, rules: Mapping[Any, Callable[..., Any]]) -> None:
        self.gm, self.group, self.report, self.rules = gm, group, report, rules
        output = next(n for n in gm.graph.nodes if n.op == "output")
        self.returns_tuple = isinstance(output.args[0], (tuple, list))
        outputs = output.args[0] if self.returns_tuple else (output.args[0],)
        self.placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        chains = [_view_chain(o) for o in outputs]
        if all(base.op == "placeholder" and chain for base, chain in chains):  # a program with no result: none
            chains = [(o, []) for o in outputs]
        self.returned: list[Node] = list(dict.fromkeys(
            base for base, chain in chains if base.op != "placeholder" or not chain))
        self.outputs = chains
        """Per output of the graph: the value it is a view of (an input, or a result of the program: the nodes
        `returned`) and the view ops that make it (none: the value itself)."""
        self.views = any(chain for _, chain in chains)
        read = {n for _, chain in chains for node in chain for n in node.all_input_nodes} | {b for b, _ in chains}
        self.view_inputs = [(i, p) for i, p in enumerate(self.placeholders) if p in read]
        """The inputs (position, placeholder) that the view ops read: the only ones `_returned` looks up."""
        self.expected = [n.meta.get("val") for n in self.returned]
        self.variants: dict[tuple[Any, ...], _Variant | None] = {}

    def __call__(self, *args: Any) -> Any:
        key = _key(args)
        variant = self.variants.get(key, _MISSING)
        if variant is _MISSING:
            return self._first_call(key, args)
        if variant is None:
            return self.gm(*args)
        self.group.last = variant.program
        return self._returned(args, variant(args))

    def _first_call(self, key: tuple[Any, ...], args: tuple[Any, ...]) -> Any:
        """Compile the signature and run it; on failure remember to run it in torch, and say why."""
        try:
            permutations = _permutations(args)
            permuted = _permuted(args, permutations)
            conversions = _conversions(permuted)
            inputs = _narrowed(permuted, conversions)
            graph = trace(lambda *a: self._program(*_restored(a, permutations)), inputs, name="torch_partition")
            program = build_program(graph, "torch_partition", [i for i, a in enumerate(inputs)
                                                              if isinstance(a, torch.Tensor)])
            variant = _Variant(program, permutations, conversions, self.expected)
            self.group.last = program
            results = variant.first_call(args, inputs)
        except Exception as e:  # noqa: BLE001 - a compiler failure must not fail the model: torch runs it
            reason = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            for op in self.group.ops:
                self.report.fall_back(op, f"its group did not compile: {reason}")
            self.variants[key] = None
            return self.gm(*args)
        self.variants[key] = variant
        self.group.programs[key] = program
        return self._returned(args, results)

    def _program(self, *args: Any) -> tuple[Any, ...]:
        return run_graph(self.gm, self.rules, args, self.returned)

    def _returned(self, args: Sequence[Any], results: list[Any]) -> Any:
        """The graph's outputs: the program's `results`, or torch's views of them or of inputs."""
        if self.views:
            env: dict[Node, Any] = {p: args[i] for i, p in self.view_inputs}
            env.update(zip(self.returned, results))
            for _, chain in self.outputs:
                for node in chain:
                    if node not in env:
                        env[node] = node.target(*map_arg(node.args, env.__getitem__),
                                                **map_arg(node.kwargs, env.__getitem__))
            results = [env[chain[-1]] if chain else env[base] for base, chain in self.outputs]
        return tuple(results) if self.returns_tuple else results[0]


def _as_expected(result: Any, expected: Any) -> Any:
    """A program's result as the tensor torch's graph expects: a torch tensor on its device, in its dtype."""
    if isinstance(result, np.ndarray):  # `asarray`, not `ascontiguousarray`, which makes a 0-d array 1-d
        result = from_host(np.asarray(result, order="C"))
    if isinstance(expected, torch.Tensor):
        if result.device != expected.device:
            result = result.to(expected.device)
        if result.dtype != expected.dtype:
            result = result.to(expected.dtype)
    return result
