// RUN: tinyton-opt %s --verify-diagnostics --split-input-file | filecheck %s --check-prefix=ERR

// Verifier messages are worded like NumPy's.

func.func @broadcast(%x: tensor<64xf32>, %y: tensor<32xf32>) -> tensor<64xf32> {
  %z = tta.add %x, %y : tensor<64xf32>, tensor<32xf32> -> tensor<64xf32>
  func.return %z : tensor<64xf32>
}
// ERR: operands could not be broadcast together with shapes (64,) (32,)

// -----

func.func @wrong_result(%x: tensor<4x1xf32>, %y: tensor<8xf32>) -> tensor<4x1xf32> {
  %z = tta.mul %x, %y : tensor<4x1xf32>, tensor<8xf32> -> tensor<4x1xf32>
  func.return %z : tensor<4x1xf32>
}
// ERR: result must be tensor<4x8xf32>, got tensor<4x1xf32>

// -----

func.func @mixed_types(%x: tensor<4xf32>, %y: tensor<4xi32>) -> tensor<4xf32> {
  %z = tta.add %x, %y : tensor<4xf32>, tensor<4xi32> -> tensor<4xf32>
  func.return %z : tensor<4xf32>
}
// ERR: tta.add operands must have one element type, got float32, int32 (insert tta.cast)

// -----

func.func @int_exp(%x: tensor<4xi32>) -> tensor<4xi32> {
  %z = tta.exp %x : tensor<4xi32>
  func.return %z : tensor<4xi32>
}
// ERR: ufunc 'exp' not supported for the input types (int32)

// -----

func.func @axis(%x: tensor<4x8xf32>) -> tensor<4xf32> {
  %z = tta.reduce_sum %x axis = 2 : tensor<4x8xf32> -> tensor<4xf32>
  func.return %z : tensor<4xf32>
}
// ERR: axis 2 is out of bounds for array of dimension 2

// -----

func.func @keepdims(%x: tensor<4x8xf32>) -> tensor<4xf32> {
  %z = tta.reduce_max %x axis = 1 keepdims : tensor<4x8xf32> -> tensor<4xf32>
  func.return %z : tensor<4xf32>
}
// ERR: tta.reduce_max result must be tensor<4x1xf32>, got tensor<4xf32>

// -----

func.func @matmul(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %z = tta.matmul %x, %x : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  func.return %z : tensor<4x8xf32>
}
// ERR: matmul: Input operand 1 has a mismatch in its core dimension 0, with gufunc signature (n?,k),(k,m?)->(n?,m?) (size 4 is different from 8)

// -----

func.func @reshape(%x: tensor<4x8xf32>) -> tensor<5x8xf32> {
  %z = tta.reshape %x : tensor<4x8xf32> -> tensor<5x8xf32>
  func.return %z : tensor<5x8xf32>
}
// ERR: cannot reshape array of size 32 into shape (5, 8)

// -----

func.func @broadcast_to(%x: tensor<3xf32>) -> tensor<4x4xf32> {
  %z = tta.broadcast_to %x : tensor<3xf32> -> tensor<4x4xf32>
  func.return %z : tensor<4x4xf32>
}
// ERR: cannot broadcast an array of shape (3,) to shape (4, 4)

// -----

func.func @transpose(%x: tensor<4x8xf32>) -> tensor<8x4xf32> {
  %z = tta.transpose %x permutation = [0, 0] : tensor<4x8xf32> -> tensor<8x4xf32>
  func.return %z : tensor<8x4xf32>
}
// ERR: axes don't match array: permutation (0, 0) for shape (4, 8)

// -----

func.func @take(%t: tensor<10x8xf32>, %i: tensor<3xf32>) -> tensor<3x8xf32> {
  %z = tta.take %t, %i axis = 0 : tensor<10x8xf32>, tensor<3xf32> -> tensor<3x8xf32>
  func.return %z : tensor<3x8xf32>
}
// ERR: take indices must be integers, got float32

// -----

func.func @predicate(%x: tensor<4xf32>) -> tensor<4xi1> {
  %z = tta.cmp "lesser", %x, %x : tensor<4xf32>, tensor<4xf32> -> tensor<4xi1>
  func.return %z : tensor<4xi1>
}
// ERR: predicate must be one of eq, ne, lt, le, gt, ge

// -----

func.func @constant() -> tensor<4xf32> {
  %c = tta.constant 1.0 : f32 -> tensor<4xf32>
  func.return %c : tensor<4xf32>
}
// ERR: constant result must be f32, a scalar

// -----

func.func @fusion_types(%x: tensor<4x8xf32>) -> tensor<4xf32> {
  %y = tta.fusion "elementwise"(%x) : (tensor<4x8xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4x8xf32>):
    tta.yield %a : tensor<4x8xf32>
  }
  func.return %y : tensor<4xf32>
}
// ERR: fusion yields (tensor<4x8xf32>) but its results are (tensor<4xf32>)

// -----

func.func @fusion_isolated(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %y = tta.fusion "elementwise"(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%a: tensor<4x8xf32>):
    %e = tta.exp %x : tensor<4x8xf32>
    tta.yield %e : tensor<4x8xf32>
  }
  func.return %y : tensor<4x8xf32>
}
// ERR: Operation using value defined out of its IsolatedFromAbove parent

// -----

func.func @fusion_args(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %y = tta.fusion "elementwise"(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>):
    tta.yield %a : tensor<4x8xf32>
  }
  func.return %y : tensor<4x8xf32>
}
// ERR: fusion block arguments (tensor<4x8xf32>, tensor<4x8xf32>) must match its inputs (tensor<4x8xf32>)

// -----

func.func @yield_outside(%x: tensor<4x8xf32>) {
  tta.yield %x : tensor<4x8xf32>
}
// ERR: 'tta.yield' expects parent op 'tta.fusion'

// -----

func.func @concatenate_mismatch(%x: tensor<2x3xf32>, %y: tensor<2x4xf32>) -> tensor<4x3xf32> {
  %z = tta.concatenate %x, %y axis = 0 : tensor<2x3xf32>, tensor<2x4xf32> -> tensor<4x3xf32>
  func.return %z : tensor<4x3xf32>
}
// ERR: all the input array dimensions except for the concatenation axis must match exactly, but along dimension 1, the array at index 0 has size 3 and the array at index 1 has size 4

// -----

func.func @slice_rank(%x: tensor<4x6xf32>) -> tensor<2x3xf32> {
  %z = tta.slice %x start = [0] step = [1] : tensor<4x6xf32> -> tensor<2x3xf32>
  func.return %z : tensor<2x3xf32>
}
// ERR: tta.slice takes one start and step per dim of its rank-2 input and result

// -----

func.func @argmax_empty(%x: tensor<4x0xf32>) -> tensor<4xi64> {
  %z = tta.argmax %x axis = 1 : tensor<4x0xf32> -> tensor<4xi64>
  func.return %z : tensor<4xi64>
}
// ERR: tta.argmax: attempt to get argmax of an empty sequence

// -----

func.func @argmax_type(%x: tensor<4x8xf32>) -> tensor<4xf32> {
  %z = tta.argmax %x axis = 1 : tensor<4x8xf32> -> tensor<4xf32>
  func.return %z : tensor<4xf32>
}
// ERR: tta.argmax result must be tensor<4xi64>, got tensor<4xf32>

// -----

func.func @cumsum_bool(%x: tensor<8xi1>) -> tensor<8xi1> {
  %z = tta.cumsum %x axis = 0 : tensor<8xi1> -> tensor<8xi1>
  func.return %z : tensor<8xi1>
}
// ERR: tta.cumsum takes numbers (the tracer counts bools in int32)

// -----

func.func @put_outside(%c: tensor<2x16xf32>, %w: tensor<2x3xf32>) -> tensor<2x16xf32> {
  %a = tta.put %c[] = %w start = [0, 12] step = [1, 2] : tensor<2x16xf32>, tensor<2x3xf32>
  func.return %a : tensor<2x16xf32>
}
// ERR: tta.put window of dim 1 leaves the destination (start 12, step 2, 3 elements, extent 16)

// -----

func.func @put_dtype(%c: tensor<16xf32>, %w: tensor<2xbf16>) -> tensor<16xf32> {
  %a = tta.put %c[] = %w start = [0] step = [1] : tensor<16xf32>, tensor<2xbf16>
  func.return %a : tensor<16xf32>
}
// ERR: tta.put value must be float32 (insert tta.cast)

// -----

func.func @put_indices(%c: tensor<2x16xf32>, %r: tensor<2x2xf32>, %pos: tensor<1xi32>) -> tensor<2x16xf32> {
  %a = tta.put %c[%pos : tensor<1xi32>] = %r start = [0, 0] step = [1, 1] axis 1 : tensor<2x16xf32>, tensor<2x2xf32>
  func.return %a : tensor<2x16xf32>
}
// ERR: tta.put value dim 1 must have one element per index

// -----

func.func @sort_inner_axis(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %z = tta.sort %x axis = 0 : tensor<4x8xf32> -> tensor<4x8xf32>
  func.return %z : tensor<4x8xf32>
}
// ERR: tta.sort sorts along the last axis (the tracer moves the axis there)

// -----

func.func @argsort_bool(%x: tensor<8xi1>) -> tensor<8xi64> {
  %z = tta.argsort %x axis = 0 : tensor<8xi1> -> tensor<8xi64>
  func.return %z : tensor<8xi64>
}
// ERR: tta.argsort takes numbers (the tracer sorts bools as int8)
