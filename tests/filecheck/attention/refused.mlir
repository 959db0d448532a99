// RUN: tinyton-opt %s -p tinyton-flash-attention | filecheck %s

// Forms that are not one attention kernel stay as they are.

// The probabilities are returned too: the S x S matrix must exist, so no flash attention.
func.func @probabilities_returned(%q: tensor<16x16xf32>, %k: tensor<16x16xf32>, %v: tensor<16x16xf32>) -> (tensor<16x16xf32>, tensor<16x16xf32>) {
  %kt = tta.transpose %k permutation = [1, 0] : tensor<16x16xf32> -> tensor<16x16xf32>
  %s = tta.matmul %q, %kt : tensor<16x16xf32>, tensor<16x16xf32> -> tensor<16x16xf32>
  %m = tta.reduce_max %s axis = 1 keepdims : tensor<16x16xf32> -> tensor<16x1xf32>
  %d = tta.sub %s, %m : tensor<16x16xf32>, tensor<16x1xf32> -> tensor<16x16xf32>
  %e = tta.exp %d : tensor<16x16xf32>
  %l = tta.reduce_sum %e axis = 1 keepdims : tensor<16x16xf32> -> tensor<16x1xf32>
  %p = tta.div %e, %l : tensor<16x16xf32>, tensor<16x1xf32> -> tensor<16x16xf32>
  %o = tta.matmul %p, %v : tensor<16x16xf32>, tensor<16x16xf32> -> tensor<16x16xf32>
  func.return %o, %p : tensor<16x16xf32>, tensor<16x16xf32>
}
// CHECK-LABEL: func.func @probabilities_returned
// CHECK-NOT:     tta.fusion
// CHECK:         func.return

// The softmax runs over the query axis (axis 0), not over the keys.
func.func @softmax_over_queries(%q: tensor<16x16xf32>, %kt: tensor<16x16xf32>, %v: tensor<16x16xf32>) -> tensor<16x16xf32> {
  %s = tta.matmul %q, %kt : tensor<16x16xf32>, tensor<16x16xf32> -> tensor<16x16xf32>
  %m = tta.reduce_max %s axis = 0 keepdims : tensor<16x16xf32> -> tensor<1x16xf32>
  %d = tta.sub %s, %m : tensor<16x16xf32>, tensor<1x16xf32> -> tensor<16x16xf32>
  %e = tta.exp %d : tensor<16x16xf32>
  %l = tta.reduce_sum %e axis = 0 keepdims : tensor<16x16xf32> -> tensor<1x16xf32>
  %p = tta.div %e, %l : tensor<16x16xf32>, tensor<1x16xf32> -> tensor<16x16xf32>
  %o = tta.matmul %p, %v : tensor<16x16xf32>, tensor<16x16xf32> -> tensor<16x16xf32>
  func.return %o : tensor<16x16xf32>
}
// CHECK-LABEL: func.func @softmax_over_queries
// CHECK-NOT:     tta.fusion
// CHECK:         func.return

// The mask is computed from the scores themselves (`where(s > 0, s, -inf)`): not a masking of q @ kᵀ
// that a block of scores can apply on its own.
func.func @mask_from_scores(%q: tensor<16x16xf32>, %kt: tensor<16x16xf32>, %v: tensor<16x16xf32>) -> tensor<16x16xf32> {
  %qk = tta.matmul %q, %kt : tensor<16x16xf32>, tensor<16x16xf32> -> tensor<16x16xf32>
  %zero = tta.constant 0.0 : f32 -> f32
  %pos = tta.cmp "gt", %qk, %zero : tensor<16x16xf32>, f32 -> tensor<16x16xi1>
  %ninf = tta.constant 0xFF800000 : f32 -> f32
  %s = tta.where %pos, %qk, %ninf : tensor<16x16xi1>, tensor<16x16xf32>, f32 -> tensor<16x16xf32>
  %m = tta.reduce_max %s axis = 1 keepdims : tensor<16x16xf32> -> tensor<16x1xf32>
  %d = tta.sub %s, %m : tensor<16x16xf32>, tensor<16x1xf32> -> tensor<16x16xf32>
  %e = tta.exp %d : tensor<16x16xf32>
  %l = tta.reduce_sum %e axis = 1 keepdims : tensor<16x16xf32> -> tensor<16x1xf32>
  %p = tta.div %e, %l : tensor<16x16xf32>, tensor<16x1xf32> -> tensor<16x16xf32>
  %o = tta.matmul %p, %v : tensor<16x16xf32>, tensor<16x16xf32> -> tensor<16x16xf32>
  func.return %o : tensor<16x16xf32>
}
// CHECK-LABEL: func.func @mask_from_scores
// CHECK-NOT:     tta.fusion
// CHECK:         func.return

// No matmul before the softmax: a plain softmax @ v (the softmax pattern's job, not attention's).
func.func @softmax_then_matmul(%x: tensor<16x16xf32>, %v: tensor<16x16xf32>) -> tensor<16x16xf32> {
  %m = tta.reduce_max %x axis = 1 keepdims : tensor<16x16xf32> -> tensor<16x1xf32>
  %d = tta.sub %x, %m : tensor<16x16xf32>, tensor<16x1xf32> -> tensor<16x16xf32>
  %e = tta.exp %d : tensor<16x16xf32>
  %l = tta.reduce_sum %e axis = 1 keepdims : tensor<16x16xf32> -> tensor<16x1xf32>
  %p = tta.div %e, %l : tensor<16x16xf32>, tensor<16x1xf32> -> tensor<16x16xf32>
  %o = tta.matmul %p, %v : tensor<16x16xf32>, tensor<16x16xf32> -> tensor<16x16xf32>
  func.return %o : tensor<16x16xf32>
}
// CHECK-LABEL: func.func @softmax_then_matmul
// CHECK-NOT:     tta.fusion
// CHECK:         func.return
