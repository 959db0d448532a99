"""The `tta` dialect: builders infer NumPy shapes, the text form round-trips, verifiers speak NumPy."""

from __future__ import annotations

import pytest
from xdsl.dialects import test
from xdsl.dialects.builtin import Float32Type, FloatAttr, IntegerAttr, ModuleOp, StringAttr, TensorType, i1, i32
from xdsl.parser import Parser
from xdsl.utils.exceptions import VerifyException

from tinyton.dialects import tinyton_context
from tinyton.dialects import tta

f32 = Float32Type()


def value(shape, element=f32):
    return test.TestOp(result_types=[tta.array_type(element, shape)]).results[0]


def parse(text: str) -> ModuleOp:
    module = Parser(tinyton_context(), text).parse_module()
    module.verify()
    return module


ROUND_TRIP = """\
builtin.module {
  func.func @f(%x: tensor<4x8xf32>, %w: tensor<8xf32>, %i: tensor<3xi32>, %t: tensor<10x8xf32>) -> tensor<4x8xf32> {
    %m = tta.reduce_max %x axis = 1 keepdims : tensor<4x8xf32> -> tensor<4x1xf32>
    %s = tta.sub %x, %m : tensor<4x8xf32>, tensor<4x1xf32> -> tensor<4x8xf32>
    %r = tta.reduce_sum %s axis = 1 : tensor<4x8xf32> -> tensor<4xf32>
    %c = tta.constant 1.000000e-06 : f32 -> f32
    %a = tta.add %w, %c : tensor<8xf32>, f32 -> tensor<8xf32>
    %p = tta.cmp "lt", %x, %w : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xi1>
    %wh = tta.where %p, %x, %c : tensor<4x8xi1>, tensor<4x8xf32>, f32 -> tensor<4x8xf32>
    %ci = tta.cast %x : tensor<4x8xf32> -> tensor<4x8xi32>
    %tr = tta.transpose %x permutation = [1, 0] : tensor<4x8xf32> -> tensor<8x4xf32>
    %mm = tta.matmul %x, %tr : tensor<4x8xf32>, tensor<8x4xf32> -> tensor<4x4xf32>
    %rs = tta.reshape %x : tensor<4x8xf32> -> tensor<32xf32>
    %bc = tta.broadcast_to %c : f32 -> tensor<4x8xf32>
    %tk = tta.take %t, %i axis = 0 : tensor<10x8xf32>, tensor<3xi32> -> tensor<3x8xf32>
    %mean = tta.reduce_mean %rs axis = 0 : tensor<32xf32> -> f32
    %f = tta.fusion "rmsnorm"(%x, %w) : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32> {
    ^bb0(%a0: tensor<4x8xf32>, %a1: tensor<8xf32>):
      %y = tta.mul %a0, %a1 : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
      tta.yield %y : tensor<4x8xf32>
    }
    func.return %f : tensor<4x8xf32>
  }
}"""


def test_round_trip() -> None:
    assert str(parse(ROUND_TRIP)) == ROUND_TRIP


def test_builders_infer_numpy_shapes() -> None:
    x, w = value((4, 8)), value((8,))
    assert tta.AddOp(x, w).result.type == TensorType(f32, [4, 8])
    assert tta.CmpOp("lt", x, value(())).result.type == TensorType(i1, [4, 8])
    assert tta.ReduceSumOp(x, 1, keepdims=True).result.type == TensorType(f32, [4, 1])
    assert tta.ReduceSumOp(value((8,)), 0).result.type == f32  # rank 0 is a scalar
    assert tta.MatmulOp(value((2, 4, 8)), value((8, 3))).result.type == TensorType(f32, [2, 4, 3])
    assert tta.TransposeOp(x, [1, 0]).result.type == TensorType(f32, [8, 4])
    assert tta.TakeOp(value((10, 8)), value((2, 3), i32)).result.type == TensorType(f32, [2, 3, 8])
    assert tta.ConstantOp(FloatAttr(1.0, f32)).result.type == f32


def test_fusion_builder_creates_block_arguments() -> None:
    x = value((4, 8))
    fusion = tta.FusionOp("elementwise", [x], [x.type])
    (arg,) = fusion.block.args
    exp = tta.ExpOp(arg)
    fusion.block.add_ops([exp, tta.YieldOp(exp)])
    fusion.verify()
    assert fusion.kind.data == "elementwise" and fusion.yield_op.values[0] is exp.result


def test_shape_helpers() -> None:
    assert tta.broadcast_shapes((4, 1), (8,), ()) == (4, 8)
    assert tta.reduced_shape((4, 8), -1, keepdims=True) == (4, 1)
    assert tta.reduced_shape((4, 8), 0, keepdims=False) == (8,)
    with pytest.raises(tta.ShapeError, match=r"could not be broadcast together with shapes \(64,\) \(32,\)"):
        tta.broadcast_shapes((64,), (32,))
    with pytest.raises(tta.ShapeError, match="axis 2 is out of bounds for array of dimension 2"):
        tta.normalize_axis(2, 2)


@pytest.mark.parametrize(
    "op, message",
    [
        (lambda: tta.AddOp.create(operands=[value((64,)), value((32,))], result_types=[value((64,)).type]),
         r"operands could not be broadcast together with shapes \(64,\) \(32,\)"),
        (lambda: tta.AddOp.create(operands=[value((4,)), value((4,), i32)], result_types=[value((4,)).type]),
         "operands must have one element type, got float32, int32"),
        (lambda: tta.ExpOp(value((4,), i32)), r"ufunc 'exp' not supported for the input types \(int32\)"),
        (lambda: tta.DivOp(value((4,), i32), value((4,), i32)), r"ufunc 'div' not supported"),
        (lambda: tta.ReduceSumOp.create(
            operands=[value((4, 8))],
            properties={"axis": IntegerAttr(1, 32)},
            result_types=[TensorType(f32, [4, 1])]),
         r"tta.reduce_sum result must be tensor<4xf32>, got tensor<4x1xf32>"),
        (lambda: tta.ReshapeOp(value((4, 8)), (5, 8)), r"cannot reshape array of size 32 into shape \(5, 8\)"),
        (lambda: tta.BroadcastToOp(value((3,)), (4, 4)), r"cannot broadcast an array of shape \(3,\) to shape"),
        (lambda: tta.CmpOp.create(
            operands=[value((4,)), value((4,))],
            properties={"predicate": StringAttr("lesser")},
            result_types=[TensorType(i1, [4])]),
         "predicate must be one of eq, ne, lt, le, gt, ge"),
    ],
)
def test_verifier_messages(op, message: str) -> None:
    with pytest.raises(VerifyException, match=message):
        op().verify()


def test_fusion_must_yield_its_result_types() -> None:
    x = value((4, 8))
    fusion = tta.FusionOp("elementwise", [x], [TensorType(f32, [4])])
    fusion.block.add_op(tta.YieldOp(fusion.block.args[0]))
    message = r"fusion yields \(tensor<4x8xf32>\) but its results are \(tensor<4xf32>\)"
    with pytest.raises(VerifyException, match=message):
        fusion.verify()
