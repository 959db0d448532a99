"""Split an ATen graph into tinyton partitions and the ops that run in torch.

torch's `CapabilityBasedPartitioner` groups the supported nodes (tinyton/torch/support.py) into the largest
partitions that keep the graph acyclic; each becomes a callable attribute of the outer graph, a
`CompiledPartition` that runs it as one array program (fused by tinyton into as few kernels as it can). Unsupported ops stay in the outer graph
and run in torch between the partitions; partitions of views and copies alone stay in torch too (a view
there costs nothing, a kernel would copy).
"""

from __future__ import annotations

import operator

from torch.fx import GraphModule
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
from torch.fx.passes.operator_support import OperatorSupportBase

from tinyton.torch.compiled_partition import CompiledPartition
from tinyton.torch.graph_rewrites import batched_matmuls, transposed_products
from tinyton.torch.interpret import op_name
from tinyton.torch.report import Group, Report
from tinyton.torch.rules import VIEWS, rules_for
from tinyton.torch.support import is_host_value, unsupported_reason


class _Supported(OperatorSupportBase):
    def __init__(self, supported: set) -> None:
        self.supported = supported

    def is_node_supported(self, submodules: dict, node) -> bool:
        return node in self.supported


def partition(gm: GraphModule, report: Report, graph: str) -> GraphModule:
    """`gm` (the AOTAutograd graph named `graph`) with its supported parts replaced by `CompiledPartition`s (in place),
    translated by the graph's rules (`rules_for`); fallbacks go to `report`."""
    rules = rules_for(graph)
    batched_matmuls(gm)
    transposed_products(gm)
    supported = set()
    for node in gm.graph.nodes:
        if node.op != "call_function" or is_host_value(node):
            continue
        if node.target is operator.getitem:  # one result of a multi-result op: goes where the op goes
            if node.args[0] in supported:
                supported.add(node)
            continue
        reason = unsupported_reason(node, rules)
        if reason is None:
            supported.add(node)
        else:
            report.fall_back(op_name(node), reason)
    partitioner = CapabilityBasedPartitioner(gm, _Supported(supported), allows_single_node_partition=True)
    proposed = [p for p in partitioner.propose_partitions()
                if any(rules[n.target] not in VIEWS for n in p.nodes)]
    fused = partitioner.fuse_partitions(proposed, prefix="tinyton_")
    for node in fused.graph.nodes:
        if node.op == "call_module" and node.target.startswith("tinyton_"):
            sub = getattr(fused, node.target)
            group = Group(graph, [op_name(n) for n in sub.graph.nodes if n.op == "call_function"])
            report.groups.append(group)
            delattr(fused, node.target)  # the submodule becomes a plain callable attribute (CompiledPartition)
            setattr(fused, node.target, CompiledPartition(sub, group, report, rules))
    return GraphModule(fused, fused.graph)  # compiled now: a lazy module's first `forward` is a stand-in
