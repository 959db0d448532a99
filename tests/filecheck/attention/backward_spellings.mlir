// RUN: tinyton-opt %s -p tinyton-canonicalize-attention | filecheck %s
// RUN: tinyton-opt %s -p tinyton-flash-attention | filecheck %s --check-prefix=FLASH
// RUN: tinyton-opt %s -p tinyton-fuse,tinyton-fusion-to-kernels | filecheck %s --check-prefix=KERNELS

// Training steps spelled otherwise are the one "attention_backward" region (forward, delta, dk/dv, dq).

// q * c shared by the scores and by dk: the scale moves out of both products.
func.func @scaled_q_shared(%q: tensor<32x16xf32>, %k: tensor<32x16xf32>, %v: tensor<32x16xf32>, %do: tensor<32x16xf32>)
    -> (tensor<32x16xf32>, tensor<32x16xf32>, tensor<32x16xf32>, tensor<32x16xf32>) {
  %c = tta.constant 2.500000e-01 : f32 -> f32
  %qs = tta.mul %q, %c : tensor<32x16xf32>, f32 -> tensor<32x16xf32>
  %kt = tta.transpose %k permutation = [1, 0] : tensor<32x16xf32> -> tensor<16x32xf32>
  %s = tta.matmul %qs, %kt : tensor<32x16xf32>, tensor<16x32xf32> -> tensor<32x32xf32>
  %m = tta.reduce_max %s axis = 1 keepdims : tensor<32x32xf32> -> tensor<32x1xf32>
  %d = tta.sub %s, %m : tensor<32x32xf32>, tensor<32x1xf32> -> tensor<32x32xf32>
  %e = tta.exp %d : tensor<32x32xf32>
  %l = tta.reduce_sum %e axis = 1 keepdims : tensor<32x32xf32> -> tensor<32x1xf32>
  %p = tta.div %e, %l : tensor<32x32xf32>, tensor<32x1xf32> -> tensor<32x32xf32>
  %vt = tta.transpose %v permutation = [1, 0] : tensor<32x16xf32> -> tensor<16x32xf32>
  %dp = tta.matmul %do, %vt : tensor<32x16xf32>, tensor<16x32xf32> -> tensor<32x32xf32>
  %dpp = tta.mul %dp, %p : tensor<32x32xf32>, tensor<32x32xf32> -> tensor<32x32xf32>
  %delta = tta.reduce_sum %dpp axis = 1 keepdims : tensor<32x32xf32> -> tensor<32x1xf32>
  %diff = tta.sub %dp, %delta : tensor<32x32xf32>, tensor<32x1xf32> -> tensor<32x32xf32>
  %ds = tta.mul %p, %diff : tensor<32x32xf32>, tensor<32x32xf32> -> tensor<32x32xf32>
  %o = tta.matmul %p, %v : tensor<32x32xf32>, tensor<32x16xf32> -> tensor<32x16xf32>
  %dqm = tta.matmul %ds, %k : tensor<32x32xf32>, tensor<32x16xf32> -> tensor<32x16xf32>
  %dq = tta.mul %dqm, %c : tensor<32x16xf32>, f32 -> tensor<32x16xf32>
  %dst = tta.transpose %ds permutation = [1, 0] : tensor<32x32xf32> -> tensor<32x32xf32>
  %dk = tta.matmul %dst, %qs : tensor<32x32xf32>, tensor<32x16xf32> -> tensor<32x16xf32>
  %pt = tta.transpose %p permutation = [1, 0] : tensor<32x32xf32> -> tensor<32x32xf32>
  %dv = tta.matmul %pt, %do : tensor<32x32xf32>, tensor<32x16xf32> -> tensor<32x16xf32>
  func.return %o, %dq, %dk, %dv : tensor<32x16xf32>, tensor<32x16xf32>, tensor<32x16xf32>, tensor<32x16xf32>
}
// CHECK-LABEL: func.func @scaled_q_shared
// CHECK-NOT:     tta.mul %q
// CHECK:         %[[QK:.*]] = tta.matmul %q, %kt
// CHECK-NEXT:    %[[S:.*]] = tta.mul %[[QK]], %c
// CHECK:         %[[DKM:.*]] = tta.matmul %dst, %q
// CHECK-NEXT:    %[[DK:.*]] = tta.mul %[[DKM]], %c
// CHECK:         func.return %o, %dq, %[[DK]], %dv
// FLASH-LABEL: func.func @scaled_q_shared
// FLASH-NEXT:    tta.fusion "attention_backward"
// FLASH-NOT:     tta.fusion
// FLASH:         func.return

// Softmax through tt.logsumexp (its guarded lse): the probabilities of the backward; the forward kernel
// stores that lse, +inf for a row holding +inf.
func.func @through_logsumexp(%q: tensor<32x16xf32>, %k: tensor<32x16xf32>, %v: tensor<32x16xf32>, %do: tensor<32x16xf32>)
    -> (tensor<32x16xf32>, tensor<32x16xf32>, tensor<32x16xf32>, tensor<32x16xf32>) {
  %kt = tta.transpose %k permutation = [1, 0] : tensor<32x16xf32> -> tensor<16x32xf32>
  %s = tta.matmul %q, %kt : tensor<32x16xf32>, tensor<16x32xf32> -> tensor<32x32xf32>
  %m = tta.reduce_max %s axis = 1 keepdims : tensor<32x32xf32> -> tensor<32x1xf32>
  %d = tta.sub %s, %m : tensor<32x32xf32>, tensor<32x1xf32> -> tensor<32x32xf32>
  %e = tta.exp %d : tensor<32x32xf32>
  %l = tta.reduce_sum %e axis = 1 keepdims : tensor<32x32xf32> -> tensor<32x1xf32>
  %inf = tta.constant 0x7f800000 : f32 -> f32
  %is_inf = tta.cmp "eq", %m, %inf : tensor<32x1xf32>, f32 -> tensor<32x1xi1>
  %ninf = tta.constant 0xff800000 : f32 -> f32
  %is_ninf = tta.cmp "eq", %m, %ninf : tensor<32x1xf32>, f32 -> tensor<32x1xi1>
  %log = tta.log %l : tensor<32x1xf32>
  %sum = tta.add %log, %m : tensor<32x1xf32>, tensor<32x1xf32> -> tensor<32x1xf32>
  %g = tta.where %is_ninf, %ninf, %sum : tensor<32x1xi1>, f32, tensor<32x1xf32> -> tensor<32x1xf32>
  %lse = tta.where %is_inf, %inf, %g : tensor<32x1xi1>, f32, tensor<32x1xf32> -> tensor<32x1xf32>
  %c = tta.sub %s, %lse : tensor<32x32xf32>, tensor<32x1xf32> -> tensor<32x32xf32>
  %p = tta.exp %c : tensor<32x32xf32>
  %vt = tta.transpose %v permutation = [1, 0] : tensor<32x16xf32> -> tensor<16x32xf32>
  %dp = tta.matmul %do, %vt : tensor<32x16xf32>, tensor<16x32xf32> -> tensor<32x32xf32>
  %dpp = tta.mul %dp, %p : tensor<32x32xf32>, tensor<32x32xf32> -> tensor<32x32xf32>
  %delta = tta.reduce_sum %dpp axis = 1 keepdims : tensor<32x32xf32> -> tensor<32x1xf32>
  %diff = tta.sub %dp, %delta : tensor<32x32xf32>, tensor<32x1xf32> -> tensor<32x32xf32>
  %ds = tta.mul %p, %diff : tensor<32x32xf32>, tensor<32x32xf32> -> tensor<32x32xf32>
  %o = tta.matmul %p, %v : tensor<32x32xf32>, tensor<32x16xf32> -> tensor<32x16xf32>
  %dq = tta.matmul %ds, %k : tensor<32x32xf32>, tensor<32x16xf32> -> tensor<32x16xf32>
  %dst = tta.transpose %ds permutation = [1, 0] : tensor<32x32xf32> -> tensor<32x32xf32>
  %dk = tta.matmul %dst, %q : tensor<32x32xf32>, tensor<32x16xf32> -> tensor<32x16xf32>
  %pt = tta.transpose %p permutation = [1, 0] : tensor<32x32xf32> -> tensor<32x32xf32>
  %dv = tta.matmul %pt, %do : tensor<32x32xf32>, tensor<32x16xf32> -> tensor<32x16xf32>
  func.return %o, %dq, %dk, %dv : tensor<32x16xf32>, tensor<32x16xf32>, tensor<32x16xf32>, tensor<32x16xf32>
}
// p is also transposed and multiplied, not only contracted: the guarded lse stays as written.
// CHECK-LABEL: func.func @through_logsumexp
// CHECK:         %lse = tta.where %is_inf, %inf, %g
// CHECK:         %p = tta.exp %c
// FLASH-LABEL: func.func @through_logsumexp
// FLASH-NEXT:    tta.fusion "attention_backward"
// FLASH-NOT:     tta.fusion
// FLASH:         func.return
// KERNELS-LABEL: func.func @scaled_q_shared_{{[0-9]+}}_attention_backward_forward
// KERNELS:         tt.log2
// KERNELS-NOT:     tt.constant 0x7f800000
// KERNELS:         tt.store
// KERNELS-LABEL: func.func @through_logsumexp_{{[0-9]+}}_attention_backward_forward
// KERNELS:         %[[LOG:.*]] = tt.log2
// KERNELS-NEXT:    %[[SUM:.*]] = tt.add %[[M:.*]], %[[LOG]]
// KERNELS:         %[[LSE:.*]] = tt.mul %[[SUM]]
// KERNELS-NEXT:    %[[INF:.*]] = tt.constant 0x7f800000 : f32 -> f32
// KERNELS-NEXT:    %[[INFS:.*]] = tt.splat %[[INF]]
// KERNELS-NEXT:    %[[IS_INF:.*]] = tt.cmp "eq", %[[M]], %[[INFS]]
// KERNELS-NEXT:    %[[GUARDED:.*]] = tt.select %[[IS_INF]], %[[INFS]], %[[LSE]]
// KERNELS:         tt.store %{{.*}}, %[[GUARDED]]

// autograd's backward of a causal softmax (the torch backend recomputes the forward in the backward graph):
// `dp * p - p * rowsum(dp * p)`, zeroed where the mask drops keys, scaled before the products, no `p @ v`.
func.func @autograd_causal(%q: tensor<32x16xf32>, %k: tensor<32x16xf32>, %v: tensor<32x16xf32>, %do: tensor<32x16xf32>)
    -> (tensor<32x16xf32>, tensor<32x16xf32>, tensor<32x16xf32>) {
  %kt = tta.transpose %k permutation = [1, 0] : tensor<32x16xf32> -> tensor<16x32xf32>
  %qk = tta.matmul %q, %kt : tensor<32x16xf32>, tensor<16x32xf32> -> tensor<32x32xf32>
  %c = tta.constant 2.500000e-01 : f32 -> f32
  %s = tta.mul %qk, %c : tensor<32x32xf32>, f32 -> tensor<32x32xf32>
  %i = tta.arange 0 to 32 : tensor<32xi32>
  %rows = tta.reshape %i : tensor<32xi32> -> tensor<32x1xi32>
  %drop = tta.cmp "gt", %i, %rows : tensor<32xi32>, tensor<32x1xi32> -> tensor<32x32xi1>
  %ninf = tta.constant 0xff800000 : f32 -> f32
  %masked = tta.where %drop, %ninf, %s : tensor<32x32xi1>, f32, tensor<32x32xf32> -> tensor<32x32xf32>
  %m = tta.reduce_max %masked axis = 1 keepdims : tensor<32x32xf32> -> tensor<32x1xf32>
  %d = tta.sub %masked, %m : tensor<32x32xf32>, tensor<32x1xf32> -> tensor<32x32xf32>
  %e = tta.exp %d : tensor<32x32xf32>
  %l = tta.reduce_sum %e axis = 1 keepdims : tensor<32x32xf32> -> tensor<32x1xf32>
  %p = tta.div %e, %l : tensor<32x32xf32>, tensor<32x1xf32> -> tensor<32x32xf32>
  %pt = tta.transpose %p permutation = [1, 0] : tensor<32x32xf32> -> tensor<32x32xf32>
  %dv = tta.matmul %pt, %do : tensor<32x32xf32>, tensor<32x16xf32> -> tensor<32x16xf32>
  %vt = tta.transpose %v permutation = [1, 0] : tensor<32x16xf32> -> tensor<16x32xf32>
  %dp = tta.matmul %do, %vt : tensor<32x16xf32>, tensor<16x32xf32> -> tensor<32x32xf32>
  %dpp = tta.mul %dp, %p : tensor<32x32xf32>, tensor<32x32xf32> -> tensor<32x32xf32>
  %delta = tta.reduce_sum %dpp axis = 1 keepdims : tensor<32x32xf32> -> tensor<32x1xf32>
  %pdelta = tta.mul %p, %delta : tensor<32x32xf32>, tensor<32x1xf32> -> tensor<32x32xf32>
  %dsraw = tta.sub %dpp, %pdelta : tensor<32x32xf32>, tensor<32x32xf32> -> tensor<32x32xf32>
  %zero = tta.constant 0.000000e+00 : f32 -> f32
  %dsm = tta.where %drop, %zero, %dsraw : tensor<32x32xi1>, f32, tensor<32x32xf32> -> tensor<32x32xf32>
  %ds = tta.mul %dsm, %c : tensor<32x32xf32>, f32 -> tensor<32x32xf32>
  %dq = tta.matmul %ds, %k : tensor<32x32xf32>, tensor<32x16xf32> -> tensor<32x16xf32>
  %dst = tta.transpose %ds permutation = [1, 0] : tensor<32x32xf32> -> tensor<32x32xf32>
  %dk = tta.matmul %dst, %q : tensor<32x32xf32>, tensor<32x16xf32> -> tensor<32x16xf32>
  func.return %dq, %dk, %dv : tensor<32x16xf32>, tensor<32x16xf32>, tensor<32x16xf32>
}
// CHECK-LABEL: func.func @autograd_causal
// CHECK:         %[[O:.*]] = tta.matmul %p, %v
// CHECK-NEXT:    %[[W:.*]] = tta.mul %do, %[[O]]
// CHECK-NEXT:    %[[DELTA:.*]] = tta.reduce_sum %[[W]] axis = 1 keepdims
// CHECK-NEXT:    %[[DIFF:.*]] = tta.sub %dp, %[[DELTA]]
// CHECK-NEXT:    %[[DS:.*]] = tta.mul %p, %[[DIFF]]
// CHECK-NOT:     tta.where %drop, %zero
// CHECK:         tta.matmul %[[DS]], %k
// FLASH-LABEL: func.func @autograd_causal
// FLASH-NEXT:    tta.fusion "attention_backward"
// FLASH-NOT:     tta.fusion
// FLASH:         func.return

// The same with a mask array (`F.scaled_dot_product_attention(..., attn_mask=keep)`): the gradient's where reads
// the scores' condition, zero on the side the scores are -inf.
func.func @autograd_mask_array(%q: tensor<32x16xf32>, %k: tensor<32x16xf32>, %v: tensor<32x16xf32>, %do: tensor<32x16xf32>,
    %keep: tensor<32x32xi1>) -> (tensor<32x16xf32>, tensor<32x16xf32>, tensor<32x16xf32>) {
  %kt = tta.transpose %k permutation = [1, 0] : tensor<32x16xf32> -> tensor<16x32xf32>
  %qk = tta.matmul %q, %kt : tensor<32x16xf32>, tensor<16x32xf32> -> tensor<32x32xf32>
  %c = tta.constant 2.500000e-01 : f32 -> f32
  %s = tta.mul %qk, %c : tensor<32x32xf32>, f32 -> tensor<32x32xf32>
  %ninf = tta.constant 0xff800000 : f32 -> f32
  %masked = tta.where %keep, %s, %ninf : tensor<32x32xi1>, tensor<32x32xf32>, f32 -> tensor<32x32xf32>
  %m = tta.reduce_max %masked axis = 1 keepdims : tensor<32x32xf32> -> tensor<32x1xf32>
  %d = tta.sub %masked, %m : tensor<32x32xf32>, tensor<32x1xf32> -> tensor<32x32xf32>
  %e = tta.exp %d : tensor<32x32xf32>
  %l = tta.reduce_sum %e axis = 1 keepdims : tensor<32x32xf32> -> tensor<32x1xf32>
  %p = tta.div %e, %l : tensor<32x32xf32>, tensor<32x1xf32> -> tensor<32x32xf32>
  %pt = tta.transpose %p permutation = [1, 0] : tensor<32x32xf32> -> tensor<32x32xf32>
  %dv = tta.matmul %pt, %do : tensor<32x32xf32>, tensor<32x16xf32> -> tensor<32x16xf32>
  %vt = tta.transpose %v permutation = [1, 0] : tensor<32x16xf32> -> tensor<16x32xf32>
  %dp = tta.matmul %do, %vt : tensor<32x16xf32>, tensor<16x32xf32> -> tensor<32x32xf32>
  %dpp = tta.mul %dp, %p : tensor<32x32xf32>, tensor<32x32xf32> -> tensor<32x32xf32>
  %delta = tta.reduce_sum %dpp axis = 1 keepdims : tensor<32x32xf32> -> tensor<32x1xf32>
  %pdelta = tta.mul %p, %delta : tensor<32x32xf32>, tensor<32x1xf32> -> tensor<32x32xf32>
  %dsraw = tta.sub %dpp, %pdelta : tensor<32x32xf32>, tensor<32x32xf32> -> tensor<32x32xf32>
  %zero = tta.constant 0.000000e+00 : f32 -> f32
  %dsm = tta.where %keep, %dsraw, %zero : tensor<32x32xi1>, tensor<32x32xf32>, f32 -> tensor<32x32xf32>
  %ds = tta.mul %dsm, %c : tensor<32x32xf32>, f32 -> tensor<32x32xf32>
  %dq = tta.matmul %ds, %k : tensor<32x32xf32>, tensor<32x16xf32> -> tensor<32x16xf32>
  %dst = tta.transpose %ds permutation = [1, 0] : tensor<32x32xf32> -> tensor<32x32xf32>
  %dk = tta.matmul %dst, %q : tensor<32x32xf32>, tensor<32x16xf32> -> tensor<32x16xf32>
  func.return %dq, %dk, %dv : tensor<32x16xf32>, tensor<32x16xf32>, tensor<32x16xf32>
}
// CHECK-LABEL: func.func @autograd_mask_array
// CHECK-NOT:     tta.where %keep, %{{.*}}, %zero
// CHECK:         func.return
// FLASH-LABEL: func.func @autograd_mask_array
// FLASH-NEXT:    tta.fusion "attention_backward"
// FLASH-NOT:     tta.fusion
// FLASH:         func.return
