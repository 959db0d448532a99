// RUN: tinyton-opt %s -p tinyton-fuse | filecheck %s
// RUN: tinyton-opt %s -p tinyton-fuse,tinyton-fusion-to-kernels | filecheck %s --check-prefix=KERNEL

// Layout ops on values read from memory are views: each consumer absorbs its own copy (and the two
// consumers, over one domain and sharing their input, then share a kernel, where the copies are one again).

func.func @shared_view(%x: tensor<4x6xf32>) -> (tensor<6x4xf32>, tensor<6x1xf32>) {
  %t = tta.transpose %x permutation = [1, 0] : tensor<4x6xf32> -> tensor<6x4xf32>
  %e = tta.exp %t : tensor<6x4xf32>
  %s = tta.reduce_sum %t axis = 1 keepdims : tensor<6x4xf32> -> tensor<6x1xf32>
  func.return %e, %s : tensor<6x4xf32>, tensor<6x1xf32>
}

// CHECK-LABEL: func.func @shared_view
// CHECK-NEXT:    %e, %s = tta.fusion "row_reduction"(%x)
// CHECK-NEXT:    ^bb0
// CHECK-NEXT:      %[[T:.+]] = tta.transpose %x_1
// CHECK-NEXT:      %e_1 = tta.exp %[[T]]
// CHECK-NEXT:      %s_1 = tta.reduce_sum %[[T]]
// CHECK-NOT:     tta.fusion

// `x.sum()` of a 2-D array is traced as a reshape then a reduction: the reshape is free.

func.func @sum_all(%x: tensor<6x9xf32>) -> f32 {
  %f = tta.reshape %x : tensor<6x9xf32> -> tensor<54xf32>
  %s = tta.reduce_sum %f axis = 0 : tensor<54xf32> -> f32
  func.return %s : f32
}

// CHECK-LABEL: func.func @sum_all
// CHECK-NEXT:    %s = tta.fusion "row_reduction"(%x) : (tensor<6x9xf32>) -> f32

// A lone reshape (returned) is a copy kernel of its own; `fusion_to_kernels` marks it as an alias.

func.func @lone_reshape(%x: tensor<6x9xf32>) -> tensor<54xf32> {
  %f = tta.reshape %x : tensor<6x9xf32> -> tensor<54xf32>
  func.return %f : tensor<54xf32>
}

// CHECK-LABEL: func.func @lone_reshape
// CHECK-NEXT:    %f = tta.fusion "reshape"(%x)

// A window read as the left operand of two products of different widths (each reads it whole, so a kernel copies
// it): each product's copy of the slice is one again in the copying kernel, which stores it once for both.

func.func @window_for_two_products(%x: tensor<8x5xf32>, %w1: tensor<4x6xf32>, %w2: tensor<4x3xf32>) -> (tensor<8x6xf32>, tensor<8x3xf32>) {
  %a = tta.slice %x start = [0, 1] step = [1, 1] : tensor<8x5xf32> -> tensor<8x4xf32>
  %p = tta.matmul %a, %w1 : tensor<8x4xf32>, tensor<4x6xf32> -> tensor<8x6xf32>
  %q = tta.matmul %a, %w2 : tensor<8x4xf32>, tensor<4x3xf32> -> tensor<8x3xf32>
  func.return %p, %q : tensor<8x6xf32>, tensor<8x3xf32>
}

// CHECK-LABEL: func.func @window_for_two_products
// CHECK-NEXT:    %[[A:.+]] = tta.fusion "slice"(%x) : (tensor<8x5xf32>) -> tensor<8x4xf32> {
// CHECK:           tta.slice
// CHECK-NOT:       tta.slice
// CHECK:         tta.fusion "matmul_epilogue"(%[[A]], %w1)
// CHECK:         tta.fusion "matmul_epilogue"(%[[A]], %w2)

// `x[1:, 2:].sum()`: the window's rows flattened for the reduction do not walk memory as one, but the reshape is
// a view all the same (its dim in two pieces, (4, 6) and (4, 1)): one kernel reads x, none copies the window.
// The load decomposes each index over the pieces: `(i // 4) * 6 + i % 4`, past the window's start (1 * 6 + 2).

func.func @sum_of_window(%x: tensor<5x6xf32>) -> f32 {
  %w = tta.slice %x start = [1, 2] step = [1, 1] : tensor<5x6xf32> -> tensor<4x4xf32>
  %f = tta.reshape %w : tensor<4x4xf32> -> tensor<16xf32>
  %s = tta.reduce_sum %f axis = 0 : tensor<16xf32> -> f32
  func.return %s : f32
}

// CHECK-LABEL: func.func @sum_of_window
// CHECK-NEXT:    %s = tta.fusion "row_reduction"(%x) {{.*}}: (tensor<5x6xf32>) -> f32
// CHECK:         func.return %s

// KERNEL-LABEL:  func.func @sum_of_window_{{.+}}(%x: !tt.ptr<f32>
// KERNEL:          %[[I:.+]] = tt.arange 0 to 16
// KERNEL:          %[[C4:.+]] = tt.constant 4 : i32
// KERNEL-NEXT:     %[[FOUR:.+]] = tt.splat %[[C4]] : i32 -> tensor<16xi32>
// KERNEL-NEXT:     %[[COL:.+]] = tt.mod %[[I]], %[[FOUR]]
// KERNEL-NEXT:     %[[ROW:.+]] = tt.floordiv %[[I]], %[[FOUR]]
// KERNEL:          %[[C6:.+]] = tt.constant 6 : i32
// KERNEL-NEXT:     %[[SIX:.+]] = tt.splat %[[C6]]
// KERNEL-NEXT:     %[[ROWS:.+]] = tt.mul %[[ROW]], %[[SIX]]
// KERNEL-NEXT:     %[[AT:.+]] = tt.add %[[COL]], %[[ROWS]]
// KERNEL:          tt.add %[[AT]], %{{.+}}
// KERNEL:          tt.load
// KERNEL-NEXT:     tt.reduce_sum
// KERNEL-NOT:    tt.load
