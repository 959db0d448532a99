// RUN: tinyton-opt %s -p tinyton-flash-attention | filecheck %s
// RUN: tinyton-opt %s -p tinyton-fuse | filecheck %s --check-prefix=FUSE

// Each form below is one attention: q @ kᵀ, elementwise steps on the scores, softmax over the last axis,
// @ v. The rewrite outlines all of it, the path from q @ kᵀ included, into one "attention" region.

// Scaled, k transposed in the program.
func.func @scaled(%q: tensor<64x32xf32>, %k: tensor<64x32xf32>, %v: tensor<64x32xf32>) -> tensor<64x32xf32> {
  %kt = tta.transpose %k permutation = [1, 0] : tensor<64x32xf32> -> tensor<32x64xf32>
  %qk = tta.matmul %q, %kt : tensor<64x32xf32>, tensor<32x64xf32> -> tensor<64x64xf32>
  %c = tta.constant 0.125 : f32 -> f32
  %s = tta.mul %qk, %c : tensor<64x64xf32>, f32 -> tensor<64x64xf32>
  %m = tta.reduce_max %s axis = 1 keepdims : tensor<64x64xf32> -> tensor<64x1xf32>
  %d = tta.sub %s, %m : tensor<64x64xf32>, tensor<64x1xf32> -> tensor<64x64xf32>
  %e = tta.exp %d : tensor<64x64xf32>
  %l = tta.reduce_sum %e axis = 1 keepdims : tensor<64x64xf32> -> tensor<64x1xf32>
  %p = tta.div %e, %l : tensor<64x64xf32>, tensor<64x1xf32> -> tensor<64x64xf32>
  %o = tta.matmul %p, %v : tensor<64x64xf32>, tensor<64x32xf32> -> tensor<64x32xf32>
  func.return %o : tensor<64x32xf32>
}
// CHECK-LABEL: func.func @scaled
// CHECK-NEXT:    %o = tta.fusion "attention"(%k, %q, %v)
// CHECK:           tta.transpose
// CHECK-NEXT:      %qk = tta.matmul
// CHECK-NEXT:      %s = tta.mul
// CHECK:           %o_1 = tta.matmul %p, %v_1
// CHECK-NEXT:      tta.yield %o_1
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %o
// FUSE-LABEL: func.func @scaled
// FUSE-NEXT:    %o = tta.fusion "attention"

// Batched (B, H, S, D), k already transposed by the caller, an additive bias and a boolean mask.
func.func @bias_and_mask(%q: tensor<2x4x16x16xf32>, %kt: tensor<2x4x16x32xf32>, %v: tensor<2x4x32x16xf32>,
                         %bias: tensor<16x32xf32>, %keep: tensor<16x32xi1>) -> tensor<2x4x16x16xf32> {
  %qk = tta.matmul %q, %kt : tensor<2x4x16x16xf32>, tensor<2x4x16x32xf32> -> tensor<2x4x16x32xf32>
  %b = tta.add %qk, %bias : tensor<2x4x16x32xf32>, tensor<16x32xf32> -> tensor<2x4x16x32xf32>
  %ninf = tta.constant 0xFF800000 : f32 -> f32
  %s = tta.where %keep, %b, %ninf : tensor<16x32xi1>, tensor<2x4x16x32xf32>, f32 -> tensor<2x4x16x32xf32>
  %m = tta.reduce_max %s axis = 3 keepdims : tensor<2x4x16x32xf32> -> tensor<2x4x16x1xf32>
  %d = tta.sub %s, %m : tensor<2x4x16x32xf32>, tensor<2x4x16x1xf32> -> tensor<2x4x16x32xf32>
  %e = tta.exp %d : tensor<2x4x16x32xf32>
  %l = tta.reduce_sum %e axis = 3 keepdims : tensor<2x4x16x32xf32> -> tensor<2x4x16x1xf32>
  %p = tta.div %e, %l : tensor<2x4x16x32xf32>, tensor<2x4x16x1xf32> -> tensor<2x4x16x32xf32>
  %o = tta.matmul %p, %v : tensor<2x4x16x32xf32>, tensor<2x4x32x16xf32> -> tensor<2x4x16x16xf32>
  func.return %o : tensor<2x4x16x16xf32>
}
// CHECK-LABEL: func.func @bias_and_mask
// CHECK-NEXT:    %o = tta.fusion "attention"
// CHECK:           %qk = tta.matmul
// CHECK-NEXT:      %b = tta.add
// CHECK:           %s = tta.where
// CHECK:           %o_1 = tta.matmul
// CHECK-NEXT:      tta.yield %o_1

// q arriving as a view (split heads: reshape, then a transpose), as k does: read in place by the kernel,
// so the view ops join the region and no kernel materialises the transposed q.
func.func @q_view(%x: tensor<16x32xf32>, %k: tensor<2x16x16xf32>, %v: tensor<2x16x16xf32>) -> tensor<2x16x16xf32> {
  %r = tta.reshape %x : tensor<16x32xf32> -> tensor<16x2x16xf32>
  %q = tta.transpose %r permutation = [1, 0, 2] : tensor<16x2x16xf32> -> tensor<2x16x16xf32>
  %kt = tta.transpose %k permutation = [0, 2, 1] : tensor<2x16x16xf32> -> tensor<2x16x16xf32>
  %qk = tta.matmul %q, %kt : tensor<2x16x16xf32>, tensor<2x16x16xf32> -> tensor<2x16x16xf32>
  %m = tta.reduce_max %qk axis = 2 keepdims : tensor<2x16x16xf32> -> tensor<2x16x1xf32>
  %d = tta.sub %qk, %m : tensor<2x16x16xf32>, tensor<2x16x1xf32> -> tensor<2x16x16xf32>
  %e = tta.exp %d : tensor<2x16x16xf32>
  %l = tta.reduce_sum %e axis = 2 keepdims : tensor<2x16x16xf32> -> tensor<2x16x1xf32>
  %p = tta.div %e, %l : tensor<2x16x16xf32>, tensor<2x16x1xf32> -> tensor<2x16x16xf32>
  %o = tta.matmul %p, %v : tensor<2x16x16xf32>, tensor<2x16x16xf32> -> tensor<2x16x16xf32>
  func.return %o : tensor<2x16x16xf32>
}
// CHECK-LABEL: func.func @q_view
// CHECK-NEXT:    %o = tta.fusion "attention"(%x, %k, %v)
// CHECK-NEXT:    ^bb0(%x_1: tensor<16x32xf32>
// CHECK-NEXT:      %r = tta.reshape %x_1
// CHECK-NEXT:      %q = tta.transpose %r
// CHECK-NEXT:      %kt = tta.transpose
// CHECK-NEXT:      %qk = tta.matmul %q, %kt
// CHECK:           tta.yield %o_1
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %o
// FUSE-LABEL: func.func @q_view
// FUSE-NEXT:    %o = tta.fusion "attention"
// FUSE-NOT:     tta.fusion
// FUSE:         func.return %o
