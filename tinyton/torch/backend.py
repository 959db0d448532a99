"""`torch.compile(model, backend="tinyton")`: AOTAutograd's forward and backward ATen graphs through tinyton.

dynamo captures the model's graph (breaking it where Python control flow depends on data, as for any
backend); `F.scaled_dot_product_attention` becomes its math (tinyton/torch/attention.py); AOTAutograd, with
torch's core-ATen decompositions, derives the forward and backward graphs (the attention's forward recomputed in
the backward, not saved); each graph is partitioned
(tinyton/torch/partitioning.py) into array programs that tinyton traces, fuses and compiles per call
signature, with the ops it cannot run left to torch. CUDA tensors run on the GPU on torch's current stream,
CPU tensors on the simulator. `mode="reduce-overhead"` replays each compiled graph as a CUDA graph.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from functorch.compile import make_boxed_func
from torch._decomp import core_aten_decompositions
from torch._dynamo.backends.common import aot_autograd
from torch.fx import GraphModule

from tinyton.torch.attention import rewrite_sdpa
from tinyton.torch.attention_partition import recompute_attention
from tinyton.torch.cudagraphs import graphed
from tinyton.torch.partitioning import partition
from tinyton.torch.report import Report

MODES = (None, "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


def _graph_compiler(report: Report, graph: str, cuda_graphs: bool) -> Callable[[GraphModule, Any], Callable]:
    def compile_graph(gm: GraphModule, example_inputs: Any) -> Callable:
        split = partition(gm, report, graph).forward  # not through `Module.__call__`: each call counts
        run = graphed(split) if cuda_graphs else split
        return make_boxed_func(run)

    return compile_graph


def backend(gm: GraphModule, example_inputs: list[Any], mode: str | None = None, options: dict | None = None,
            report: Report | None = None) -> Callable:
    """The torch.compile backend (`backend="tinyton"`, or this function itself). `mode="reduce-overhead"`
    replays each compiled graph as a CUDA graph; `report` collects what `explain` shows."""
    if mode not in MODES:
        raise ValueError(f"tinyton backend: unknown mode {mode!r}; one of {', '.join(map(str, MODES[1:]))}")
    report = report if report is not None else Report()
    cuda_graphs = mode == "reduce-overhead"
    rewrite_sdpa(gm)
    compile_graph = functools.partial(_graph_compiler, report, cuda_graphs=cuda_graphs)
    aot = aot_autograd(
        fw_compiler=compile_graph("forward"),
        bw_compiler=compile_graph("backward"),
        inference_compiler=compile_graph("inference"),
        decompositions=core_aten_decompositions(),
        partition_fn=recompute_attention,
    )
    return aot(gm, example_inputs)


def reported_backend(report: Report) -> Callable:
    """The backend writing into `report` (what explain compiles with)."""
    return functools.partial(backend, report=report)


