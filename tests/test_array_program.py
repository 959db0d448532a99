"""Array programs end to end: trace, fuse, plan buffers, launch in order (kernels stubbed where needed)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pytest

import tinyton.lowering.fusion
import tinyton.rewrites.pipeline
from tinyton.cli.graph import render_fusion_graph, to_dot
from tinyton.compiler import program as compiler_program
from tinyton.dialects import tta
from tinyton.frontend import array_ops as tt
from tinyton.frontend import programs as program_module
from tinyton.frontend.reference import evaluate, run_block
from tinyton.frontend.tracing import trace
from tinyton.rewrites.outline import outline_each_op, rebuild

RNG = np.random.default_rng(0)
X = RNG.standard_normal((4, 8)).astype(np.float32)
W = RNG.standard_normal(8).astype(np.float32)


def softmax(x):
    e = tt.exp(x - tt.max(x, axis=-1, keepdims=True))
    return e / tt.sum(e, axis=-1, keepdims=True)


def rmsnorm(x, w):
    return x * tt.rsqrt(tt.mean(x * x, axis=-1, keepdims=True) + 1e-6) * w


def np_softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def test_reference_interpreter_matches_numpy() -> None:
    (y,) = evaluate(trace(softmax, [X]), X)
    np.testing.assert_allclose(y, np_softmax(X), rtol=1e-6)
    (z,) = evaluate(trace(rmsnorm, [X, W]), X, W)
    np.testing.assert_allclose(z, X / np.sqrt((X * X).mean(-1, keepdims=True) + 1e-6) * W, rtol=1e-5)


def fuse_whole(module, kind: str):
    """The whole function as one region."""
    fn = module.body.block.first_op
    rebuild(fn, [([op for op in fn.body.block.ops if op.name != "func.return"], kind)])
    return module


def test_outlining_preserves_semantics() -> None:
    graph = trace(rmsnorm, [X, W])
    unfused = outline_each_op(graph.clone())
    unfused.verify()
    assert sum(isinstance(op, tta.FusionOp) for op in unfused.walk()) == 6  # every op but the constant
    fused = fuse_whole(graph.clone(), "rmsnorm")
    fused.verify()
    (a,), (b,), (c,) = evaluate(graph, X, W), evaluate(unfused, X, W), evaluate(fused, X, W)
    assert np.array_equal(a, b) and np.array_equal(a, c)


def test_fusion_graph_dot() -> None:
    graph = trace(softmax, [X])
    fused = fuse_whole(graph.clone(), "softmax")
    dot = to_dot(graph, fused)
    assert 'label="softmax: 1 launch (fused) / 5 unfused"' in dot
    assert "subgraph cluster_0 {" in dot and 'label="#0 softmax"' in dot
    assert 'label="reduce_max axis=1 keepdims\\n4x8 float32"' not in dot  # result shape is 4x1
    assert 'label="reduce_max axis=1 keepdims\\n4x1 float32"' in dot
    assert dot.count(" -> ") == 8  # x->max, x->sub, max->sub, sub->exp, exp->sum, exp->div, sum->div, div->result
    assert render_fusion_graph(graph, fused, "dot") == dot
    with pytest.raises(ValueError, match="unknown graph format"):
        render_fusion_graph(graph, fused, "pdf")


@dataclass
class FakeSpec:
    """A KernelSpec whose 'kernel' is the fusion region itself, run by the reference interpreter."""

    fusion: tta.FusionOp
    grid: tuple[int, ...] = (1, 1, 1)
    num_warps: int = 4
    alias: int | None = None
    scratch: tuple = ()
    fallback: tuple = ()
    tiles: dict = field(default_factory=dict)

    @property
    def module(self):
        return self.fusion

    @property
    def fusions(self):
        return [self.fusion]

    @property
    def inputs(self):
        return list(self.fusion.inputs)

    @property
    def outputs(self):
        return list(self.fusion.outputs)

    @property
    def bindings(self):
        return [*self.inputs, *self.outputs]


@dataclass
class FakeKernel:
    fusion: tta.FusionOp
    launched: list[str]

    def simulate(self, grid, params):
        n = len(self.fusion.inputs)
        self.launched.append(self.fusion.kind.data)
        for out, value in zip(params[n:], run_block(self.fusion.block, params[:n])):
            out[...] = value


@pytest.fixture
def stub_backend(monkeypatch):
    """Stand-ins for the fusion pass, kernel codegen and compiler: regions are evaluated with NumPy."""
    fusion_to_kernels = lambda module, *_: [FakeSpec(op) for op in module.walk() if isinstance(op, tta.FusionOp)]
    monkeypatch.setattr(tinyton.lowering.fusion, "fusion_to_kernels", fusion_to_kernels)
    fuse_module = lambda module, fuse: fuse_whole(module, "whole") if fuse else outline_each_op(module)
    monkeypatch.setattr(tinyton.rewrites.pipeline, "fuse_module", fuse_module)

    launched: list[str] = []
    from tinyton.runtime import driver

    monkeypatch.setattr(compiler_program, "compile_module", lambda fusion, **_: FakeKernel(fusion, launched))
    monkeypatch.setattr(driver, "is_available", lambda: False)
    monkeypatch.setenv("TINYTON_OVERLAP_LAUNCHES", "0")  # the stand-in specs are regions, not kernel modules
    program_module._PROGRAMS.clear()
    return launched


def test_program_runs_kernels_in_order(stub_backend) -> None:
    fused = program_module.compile_array_program(rmsnorm, [X, W], fuse=True)
    unfused = program_module.compile_array_program(rmsnorm, [X, W], fuse=False)
    assert (fused.num_launches, unfused.num_launches) == (1, 6)
    expected = X / np.sqrt((X * X).mean(-1, keepdims=True) + 1e-6) * W
    np.testing.assert_allclose(fused(X, W), expected, rtol=1e-5)
    np.testing.assert_allclose(unfused(X, W), expected, rtol=1e-5)
    assert stub_backend == ["whole"] + ["elementwise", "row_reduction"] + ["elementwise"] * 4
    assert set(fused.asm) == {"graph", "fused", "kernel0:tt", "ptx"}
    assert "tta.reduce_mean" in fused.asm["graph"] and 'tta.fusion "whole"' in fused.asm["fused"]
    assert program_module.compile_array_program(rmsnorm, [X, W], fuse=True) is fused  # cached


def test_program_tuples_scalars_and_env(stub_backend, monkeypatch) -> None:
    def stats(x, scale):
        return tt.max(x) * scale, x.sum(axis=0)

    monkeypatch.setenv("TINYTON_FUSION", "0")
    prog = program_module.compile_array_program(stats, [X, 2.0])
    assert prog.num_launches == 4  # reshape (flatten for axis=None), reduce_max, mul by 2.0, reduce_sum
    top, col = prog(X, 2.0)
    np.testing.assert_allclose(top, X.max() * 2, rtol=1e-6)
    np.testing.assert_allclose(col, X.sum(0), rtol=1e-5)
    assert program_module.run_array_program(stats, [X, 2.0])[1].shape == (8,)


def test_graph_command_loads_file_function(stub_backend, tmp_path, monkeypatch) -> None:
    source = tmp_path / "model.py"
    source.write_text(
        "import tinyton.language as tt\n\n"
        "def rmsnorm(x, w):\n"
        "    return x * tt.rsqrt(tt.mean(x * x, axis=-1, keepdims=True) + 1e-6) * w\n"
    )
    from tinyton.cli import graph

    dot = graph.graph_command(f"{source}:rmsnorm", ["64x32", "32"], "dot")
    assert 'label="rmsnorm: 1 launch (fused) / 6 unfused"' in dot and "subgraph cluster_0" in dot
    monkeypatch.setattr(graph.shutil, "which", lambda name: None)
    with pytest.raises(RuntimeError, match="needs Graphviz's `dot` program"):
        graph.graph_command(f"{source}:rmsnorm", ["64x32", "32"], "svg")
    with pytest.raises(LookupError, match="has no function 'softmax'"):
        graph.graph_command(f"{source}:softmax", ["64x32"])


def test_unfused_program_on_the_simulator(monkeypatch) -> None:
    """The real kernel codegen and simulator, one kernel per op (no fusion pass needed)."""
    from tinyton.runtime import driver

    monkeypatch.setattr(driver, "is_available", lambda: False)

    def program(x, w):
        flat = (x * w).reshape(-1)  # a reshape of an intermediate shares its buffer: no launch
        return softmax(x), flat.reshape(4, 8).sum(axis=0)

    prog = program_module.compile_array_program(program, [X, W], fuse=False)
    y, s = prog(X, W)
    np.testing.assert_allclose(y, np_softmax(X), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(s, (X * W).sum(0), rtol=1e-5)
    assert prog.num_launches == 5 + 2  # softmax's 5 ops, mul, reduce_sum (the reshapes are aliases)
    assert [k for k in prog.asm if k.startswith("kernel")] == [f"kernel{i}:tt" for i in range(7)]
    assert "tt.mul" in prog.asm["kernel0:tt"] and "tt.reduce_max" in prog.asm["kernel1:tt"]


def test_fused_softmax_and_rmsnorm_on_the_simulator(monkeypatch) -> None:
    """The real pipeline: one kernel each, same answers as NumPy and as the unfused program."""
    from tinyton.runtime import driver

    monkeypatch.setattr(driver, "is_available", lambda: False)
    for fn, args, expected in [
        (softmax, [X], np_softmax(X)),
        (rmsnorm, [X, W], X / np.sqrt((X * X).mean(-1, keepdims=True) + 1e-6) * W),
    ]:
        fused = program_module.compile_array_program(fn, args, fuse=True)
        assert fused.num_launches == 1 and 'tta.fusion "' in fused.asm["fused"]
        np.testing.assert_allclose(fused(*args), expected, rtol=1e-5, atol=1e-7)


def test_a_returned_reshape_is_written_in_place(monkeypatch) -> None:
    """A result that reshapes an intermediate read by nothing else: its producer writes the result's
    buffer, no copy; through a chain of reshapes (the first shares its input's buffer) the copy stays."""
    from tinyton.runtime import driver

    monkeypatch.setattr(driver, "is_available", lambda: False)

    def program(x, w):
        return (x * w).reshape(8, 4), (x + w).reshape(-1).reshape(8, 4)

    prog = program_module.compile_array_program(program, [X, W], fuse=False)
    product, total = prog(X, W)
    np.testing.assert_allclose(product, (X * W).reshape(8, 4), rtol=1e-6)
    np.testing.assert_allclose(total, (X + W).reshape(8, 4), rtol=1e-6)
    assert [step.launch.kind for step in prog.steps] == ["elementwise", "elementwise", "reshape"]
