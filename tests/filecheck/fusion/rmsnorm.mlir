// RUN: tinyton-opt %s -p tinyton-fuse-patterns | filecheck %s --check-prefix=PATTERN
// RUN: tinyton-opt %s -p tinyton-fuse | filecheck %s

// x * rsqrt(mean(x*x) + eps) is the pattern; the weight multiply joins in the general step.

func.func @rmsnorm(%x: tensor<4x8xf32>, %w: tensor<8xf32>) -> tensor<4x8xf32> {
  %sq = tta.mul %x, %x : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %ms = tta.reduce_mean %sq axis = 1 keepdims : tensor<4x8xf32> -> tensor<4x1xf32>
  %eps = tta.constant 9.99999997E-7 : f32 -> f32
  %a = tta.add %ms, %eps : tensor<4x1xf32>, f32 -> tensor<4x1xf32>
  %r = tta.rsqrt %a : tensor<4x1xf32>
  %y = tta.mul %x, %r : tensor<4x8xf32>, tensor<4x1xf32> -> tensor<4x8xf32>
  %o = tta.mul %y, %w : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  func.return %o : tensor<4x8xf32>
}

// PATTERN-LABEL: func.func @rmsnorm
// PATTERN-NEXT:    %y = tta.fusion "rmsnorm"(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32> {
// PATTERN-NEXT:    ^bb0(%x_1: tensor<4x8xf32>):
// PATTERN-NEXT:      %eps = tta.constant 1.000000e-06 : f32 -> f32
// PATTERN-NEXT:      %sq = tta.mul %x_1, %x_1
// PATTERN-NEXT:      %ms = tta.reduce_mean %sq axis = 1 keepdims
// PATTERN-NEXT:      %a = tta.add %ms, %eps
// PATTERN-NEXT:      %r = tta.rsqrt %a
// PATTERN-NEXT:      %y_1 = tta.mul %x_1, %r
// PATTERN-NEXT:      tta.yield %y_1
// PATTERN-NEXT:    }
// PATTERN-NEXT:    %o = tta.mul %y, %w

// CHECK-LABEL: func.func @rmsnorm
// CHECK-NEXT:    %o = tta.fusion "rmsnorm"(%x, %w) : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32> {
// CHECK:           %y = tta.mul %x_1, %r
// CHECK-NEXT:      %o_1 = tta.mul %y, %w_1
// CHECK-NEXT:      tta.yield %o_1
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %o

// Commuted operands (`rsqrt(..) * x`, `eps + mean`) are canonicalised, then matched.

func.func @rmsnorm_commuted(%x: tensor<2x3x16xf32>) -> tensor<2x3x16xf32> {
  %sq = tta.mul %x, %x : tensor<2x3x16xf32>, tensor<2x3x16xf32> -> tensor<2x3x16xf32>
  %ms = tta.reduce_mean %sq axis = 2 keepdims : tensor<2x3x16xf32> -> tensor<2x3x1xf32>
  %eps = tta.constant 9.99999974E-6 : f32 -> f32
  %a = tta.add %eps, %ms : f32, tensor<2x3x1xf32> -> tensor<2x3x1xf32>
  %r = tta.rsqrt %a : tensor<2x3x1xf32>
  %y = tta.mul %r, %x : tensor<2x3x1xf32>, tensor<2x3x16xf32> -> tensor<2x3x16xf32>
  func.return %y : tensor<2x3x16xf32>
}

// PATTERN-LABEL: func.func @rmsnorm_commuted
// PATTERN-NEXT:    %y = tta.fusion "rmsnorm"(%x)
// PATTERN:           %a = tta.add %ms, %eps
// PATTERN:           %y_1 = tta.mul %x_1, %r

// x * z is no square: no rmsnorm, but still one row-reduction kernel.

func.func @not_a_square(%x: tensor<4x8xf32>, %z: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %sq = tta.mul %x, %z : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %ms = tta.reduce_mean %sq axis = 1 keepdims : tensor<4x8xf32> -> tensor<4x1xf32>
  %eps = tta.constant 9.99999997E-7 : f32 -> f32
  %a = tta.add %ms, %eps : tensor<4x1xf32>, f32 -> tensor<4x1xf32>
  %r = tta.rsqrt %a : tensor<4x1xf32>
  %y = tta.mul %x, %r : tensor<4x8xf32>, tensor<4x1xf32> -> tensor<4x8xf32>
  func.return %y : tensor<4x8xf32>
}

// PATTERN-LABEL: func.func @not_a_square
// PATTERN-NOT:     tta.fusion
// PATTERN:         func.return %y

// CHECK-LABEL: func.func @not_a_square
// CHECK-NEXT:    %y = tta.fusion "row_reduction"(%x, %z)
// CHECK-NOT:     tta.fusion
// CHECK:         func.return %y
