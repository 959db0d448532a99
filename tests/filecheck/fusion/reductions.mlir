// RUN: tinyton-opt %s -p tinyton-fuse | filecheck %s

// Two reductions over the same rows that only share their input (siblings): one kernel.

func.func @sum_and_max(%x: tensor<6x100xf32>) -> (tensor<6x1xf32>, tensor<6xf32>) {
  %s = tta.reduce_sum %x axis = 1 keepdims : tensor<6x100xf32> -> tensor<6x1xf32>
  %m = tta.reduce_max %x axis = 1 : tensor<6x100xf32> -> tensor<6xf32>
  func.return %s, %m : tensor<6x1xf32>, tensor<6xf32>
}

// CHECK-LABEL: func.func @sum_and_max
// CHECK-NEXT:    %s, %m = tta.fusion "row_reduction"(%x) : (tensor<6x100xf32>) -> (tensor<6x1xf32>, tensor<6xf32>)
// CHECK-NEXT:    ^bb0
// CHECK-NEXT:      %s_1 = tta.reduce_sum
// CHECK-NEXT:      %m_1 = tta.reduce_max
// CHECK-NEXT:      tta.yield %s_1, %m_1
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %s, %m

// Layer norm: mean, then variance around it (a reduction of a broadcast-back value), then weight and
// bias: one kernel of two dependent reductions. (Its core, d * rsqrt(mean(d*d) + eps), is the
// rmsnorm pattern applied to d = x - mean, which names the region.)

func.func @layernorm(%x: tensor<2x3x64xf32>, %w: tensor<64xf32>, %b: tensor<64xf32>) -> tensor<2x3x64xf32> {
  %mu = tta.reduce_mean %x axis = 2 keepdims : tensor<2x3x64xf32> -> tensor<2x3x1xf32>
  %d = tta.sub %x, %mu : tensor<2x3x64xf32>, tensor<2x3x1xf32> -> tensor<2x3x64xf32>
  %d2 = tta.mul %d, %d : tensor<2x3x64xf32>, tensor<2x3x64xf32> -> tensor<2x3x64xf32>
  %var = tta.reduce_mean %d2 axis = 2 keepdims : tensor<2x3x64xf32> -> tensor<2x3x1xf32>
  %eps = tta.constant 9.99999974E-6 : f32 -> f32
  %v = tta.add %var, %eps : tensor<2x3x1xf32>, f32 -> tensor<2x3x1xf32>
  %r = tta.rsqrt %v : tensor<2x3x1xf32>
  %n = tta.mul %d, %r : tensor<2x3x64xf32>, tensor<2x3x1xf32> -> tensor<2x3x64xf32>
  %y = tta.mul %n, %w : tensor<2x3x64xf32>, tensor<64xf32> -> tensor<2x3x64xf32>
  %o = tta.add %y, %b : tensor<2x3x64xf32>, tensor<64xf32> -> tensor<2x3x64xf32>
  func.return %o : tensor<2x3x64xf32>
}

// CHECK-LABEL: func.func @layernorm
// CHECK-NEXT:    %o = tta.fusion "rmsnorm"(%x, %w, %b)
// CHECK-COUNT-2:   tta.reduce_mean
// CHECK-NOT:     tta.fusion
// CHECK:         func.return %o

// Column reduction (axis 0) with a prologue and a broadcast-back epilogue.

func.func @center_columns(%x: tensor<100x7xf32>) -> tensor<100x7xf32> {
  %a = tta.abs %x : tensor<100x7xf32>
  %m = tta.reduce_mean %a axis = 0 keepdims : tensor<100x7xf32> -> tensor<1x7xf32>
  %y = tta.sub %a, %m : tensor<100x7xf32>, tensor<1x7xf32> -> tensor<100x7xf32>
  func.return %y : tensor<100x7xf32>
}

// CHECK-LABEL: func.func @center_columns
// CHECK-NEXT:    %y = tta.fusion "reduction"(%x)
// CHECK-NOT:     tta.fusion

// Reductions of different rows (axis 1 of x, axis 1 of its transpose) stay apart.

func.func @different_rows(%x: tensor<8x16xf32>) -> (tensor<8xf32>, tensor<16xf32>) {
  %r = tta.reduce_sum %x axis = 1 : tensor<8x16xf32> -> tensor<8xf32>
  %c = tta.reduce_sum %x axis = 0 : tensor<8x16xf32> -> tensor<16xf32>
  func.return %r, %c : tensor<8xf32>, tensor<16xf32>
}

// CHECK-LABEL: func.func @different_rows
// CHECK-NEXT:    %r = tta.fusion "row_reduction"(%x)
// CHECK:         %c = tta.fusion "reduction"(%x)
