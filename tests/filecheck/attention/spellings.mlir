// RUN: tinyton-opt %s -p tinyton-canonicalize-attention | filecheck %s
// RUN: tinyton-opt %s -p tinyton-flash-attention | filecheck %s --check-prefix=FLASH

// Every spelling of the scale and of the softmax becomes `(q @ kᵀ) * c` and `exp(s - m) / sum(exp(s - m))`,
// which the flash-attention pattern outlines into one region.

// `q @ kᵀ / sqrt(d)`: a division by a constant is a multiplication by its reciprocal.
func.func @divided(%q: tensor<64x16xf32>, %k: tensor<64x16xf32>, %v: tensor<64x16xf32>) -> tensor<64x16xf32> {
  %kt = tta.transpose %k permutation = [1, 0] : tensor<64x16xf32> -> tensor<16x64xf32>
  %qk = tta.matmul %q, %kt : tensor<64x16xf32>, tensor<16x64xf32> -> tensor<64x64xf32>
  %c = tta.constant 4.0 : f32 -> f32
  %s = tta.div %qk, %c : tensor<64x64xf32>, f32 -> tensor<64x64xf32>
  %m = tta.reduce_max %s axis = 1 keepdims : tensor<64x64xf32> -> tensor<64x1xf32>
  %d = tta.sub %s, %m : tensor<64x64xf32>, tensor<64x1xf32> -> tensor<64x64xf32>
  %e = tta.exp %d : tensor<64x64xf32>
  %l = tta.reduce_sum %e axis = 1 keepdims : tensor<64x64xf32> -> tensor<64x1xf32>
  %p = tta.div %e, %l : tensor<64x64xf32>, tensor<64x1xf32> -> tensor<64x64xf32>
  %o = tta.matmul %p, %v : tensor<64x64xf32>, tensor<64x16xf32> -> tensor<64x16xf32>
  func.return %o : tensor<64x16xf32>
}
// CHECK-LABEL: func.func @divided
// CHECK:         %qk = tta.matmul %q, %kt
// CHECK-NEXT:    %[[C:.*]] = tta.constant 2.500000e-01 : f32 -> f32
// CHECK-NEXT:    %[[S:.*]] = tta.mul %qk, %[[C]] : tensor<64x64xf32>, f32
// CHECK-NEXT:    %m = tta.reduce_max %[[S]]
// CHECK-NOT:     tta.div %qk
// FLASH-LABEL: func.func @divided
// FLASH-NEXT:    tta.fusion "attention"

// `(q * c) @ (k * c')ᵀ`: scales of q and k move behind the product and merge.
func.func @scaled_operands(%q: tensor<2x64x16xf16>, %k: tensor<2x64x16xf16>, %v: tensor<2x64x16xf16>) -> tensor<2x64x16xf16> {
  %a = tta.constant 0.5 : f16 -> f16
  %qs = tta.mul %q, %a : tensor<2x64x16xf16>, f16 -> tensor<2x64x16xf16>
  %b = tta.constant 0.25 : f16 -> f16
  %ks = tta.mul %k, %b : tensor<2x64x16xf16>, f16 -> tensor<2x64x16xf16>
  %kt = tta.transpose %ks permutation = [0, 2, 1] : tensor<2x64x16xf16> -> tensor<2x16x64xf16>
  %s = tta.matmul %qs, %kt : tensor<2x64x16xf16>, tensor<2x16x64xf16> -> tensor<2x64x64xf16>
  %m = tta.reduce_max %s axis = 2 keepdims : tensor<2x64x64xf16> -> tensor<2x64x1xf16>
  %d = tta.sub %s, %m : tensor<2x64x64xf16>, tensor<2x64x1xf16> -> tensor<2x64x64xf16>
  %e = tta.exp %d : tensor<2x64x64xf16>
  %l = tta.reduce_sum %e axis = 2 keepdims : tensor<2x64x64xf16> -> tensor<2x64x1xf16>
  %p = tta.div %e, %l : tensor<2x64x64xf16>, tensor<2x64x1xf16> -> tensor<2x64x64xf16>
  %o = tta.matmul %p, %v : tensor<2x64x64xf16>, tensor<2x64x16xf16> -> tensor<2x64x16xf16>
  func.return %o : tensor<2x64x16xf16>
}
// CHECK-LABEL: func.func @scaled_operands
// CHECK-NOT:     tta.mul %q
// CHECK-NOT:     tta.mul %k
// CHECK:         %[[KT:.*]] = tta.transpose %k permutation = [0, 2, 1]
// CHECK-NEXT:    %[[QK:.*]] = tta.matmul %q, %[[KT]]
// CHECK-NEXT:    %[[C:.*]] = tta.constant 1.250000e-01 : f16 -> f16
// CHECK-NEXT:    %[[S:.*]] = tta.mul %[[QK]], %[[C]]
// CHECK-NEXT:    %m = tta.reduce_max %[[S]]
// FLASH-LABEL: func.func @scaled_operands
// FLASH-NEXT:    tta.fusion "attention"(%k, %q, %v)

// Softmax through logsumexp: exp(s - m - log(sum(exp(s - m)))) is exp(s - m) / sum(exp(s - m)).
func.func @logsumexp(%q: tensor<64x16xf32>, %kt: tensor<16x64xf32>, %v: tensor<64x16xf32>) -> tensor<64x16xf32> {
  %s = tta.matmul %q, %kt : tensor<64x16xf32>, tensor<16x64xf32> -> tensor<64x64xf32>
  %m = tta.reduce_max %s axis = 1 keepdims : tensor<64x64xf32> -> tensor<64x1xf32>
  %d1 = tta.sub %s, %m : tensor<64x64xf32>, tensor<64x1xf32> -> tensor<64x64xf32>
  %d2 = tta.sub %s, %m : tensor<64x64xf32>, tensor<64x1xf32> -> tensor<64x64xf32>
  %e = tta.exp %d2 : tensor<64x64xf32>
  %l = tta.reduce_sum %e axis = 1 keepdims : tensor<64x64xf32> -> tensor<64x1xf32>
  %log = tta.log %l : tensor<64x1xf32>
  %ls = tta.sub %d1, %log : tensor<64x64xf32>, tensor<64x1xf32> -> tensor<64x64xf32>
  %p = tta.exp %ls : tensor<64x64xf32>
  %o = tta.matmul %p, %v : tensor<64x64xf32>, tensor<64x16xf32> -> tensor<64x16xf32>
  func.return %o : tensor<64x16xf32>
}
// CHECK-LABEL: func.func @logsumexp
// CHECK:         %m = tta.reduce_max %s
// CHECK-NEXT:    %d2 = tta.sub %s, %m
// CHECK-NEXT:    %e = tta.exp %d2
// CHECK-NEXT:    %l = tta.reduce_sum %e
// CHECK-NEXT:    %{{.*}} = tta.div %e, %l
// CHECK-NOT:     tta.log
// FLASH-LABEL: func.func @logsumexp
// FLASH-NEXT:    tta.fusion "attention"

// `tt.logsumexp`'s guarded lse (scipy's: rows whose max is ±inf): where p is only contracted (`p @ v`),
// exp(s - lse) is the softmax, NaN rows included.
func.func @guarded_logsumexp(%q: tensor<32x16xf32>, %kt: tensor<16x32xf32>, %v: tensor<32x16xf32>) -> tensor<32x16xf32> {
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
  %g1 = tta.where %is_ninf, %ninf, %sum : tensor<32x1xi1>, f32, tensor<32x1xf32> -> tensor<32x1xf32>
  %lse = tta.where %is_inf, %inf, %g1 : tensor<32x1xi1>, f32, tensor<32x1xf32> -> tensor<32x1xf32>
  %c = tta.sub %s, %lse : tensor<32x32xf32>, tensor<32x1xf32> -> tensor<32x32xf32>
  %p = tta.exp %c : tensor<32x32xf32>
  %o = tta.matmul %p, %v : tensor<32x32xf32>, tensor<32x16xf32> -> tensor<32x16xf32>
  func.return %o : tensor<32x16xf32>
}
// CHECK-LABEL: func.func @guarded_logsumexp
// CHECK:         %l = tta.reduce_sum %e
// CHECK-NEXT:    %[[P:.*]] = tta.div %e, %l
// CHECK-NEXT:    %o = tta.matmul %[[P]], %v
// CHECK-NOT:     tta.where
// FLASH-LABEL: func.func @guarded_logsumexp
// FLASH-NEXT:    tta.fusion "attention"

// Returned as well, the guarded p keeps its own rows of +inf (NaN at the +inf only): not folded.
func.func @guarded_logsumexp_returned(%s: tensor<32x32xf32>) -> tensor<32x32xf32> {
  %m = tta.reduce_max %s axis = 1 keepdims : tensor<32x32xf32> -> tensor<32x1xf32>
  %d = tta.sub %s, %m : tensor<32x32xf32>, tensor<32x1xf32> -> tensor<32x32xf32>
  %e = tta.exp %d : tensor<32x32xf32>
  %l = tta.reduce_sum %e axis = 1 keepdims : tensor<32x32xf32> -> tensor<32x1xf32>
  %inf = tta.constant 0x7f800000 : f32 -> f32
  %is_inf = tta.cmp "eq", %m, %inf : tensor<32x1xf32>, f32 -> tensor<32x1xi1>
  %log = tta.log %l : tensor<32x1xf32>
  %sum = tta.add %log, %m : tensor<32x1xf32>, tensor<32x1xf32> -> tensor<32x1xf32>
  %lse = tta.where %is_inf, %inf, %sum : tensor<32x1xi1>, f32, tensor<32x1xf32> -> tensor<32x1xf32>
  %c = tta.sub %s, %lse : tensor<32x32xf32>, tensor<32x1xf32> -> tensor<32x32xf32>
  %p = tta.exp %c : tensor<32x32xf32>
  func.return %p : tensor<32x32xf32>
}
// CHECK-LABEL: func.func @guarded_logsumexp_returned
// CHECK:         %lse = tta.where %is_inf, %inf, %sum
// CHECK:         %p = tta.exp %c

// The normalisation after the product, as the kernel itself defers it: (e @ v) / l is (e / l) @ v.
func.func @normalised_after_the_product(%q: tensor<32x16xf32>, %kt: tensor<16x32xf32>, %v: tensor<32x16xf32>) -> tensor<32x16xf32> {
  %s = tta.matmul %q, %kt : tensor<32x16xf32>, tensor<16x32xf32> -> tensor<32x32xf32>
  %m = tta.reduce_max %s axis = 1 keepdims : tensor<32x32xf32> -> tensor<32x1xf32>
  %d = tta.sub %s, %m : tensor<32x32xf32>, tensor<32x1xf32> -> tensor<32x32xf32>
  %e = tta.exp %d : tensor<32x32xf32>
  %ev = tta.matmul %e, %v : tensor<32x32xf32>, tensor<32x16xf32> -> tensor<32x16xf32>
  %l = tta.reduce_sum %e axis = 1 keepdims : tensor<32x32xf32> -> tensor<32x1xf32>
  %o = tta.div %ev, %l : tensor<32x16xf32>, tensor<32x1xf32> -> tensor<32x16xf32>
  func.return %o : tensor<32x16xf32>
}
// CHECK-LABEL: func.func @normalised_after_the_product
// CHECK:         %l = tta.reduce_sum %e
// CHECK-NEXT:    %[[P:.*]] = tta.div %e, %l : tensor<32x32xf32>, tensor<32x1xf32>
// CHECK-NEXT:    %[[O:.*]] = tta.matmul %[[P]], %v
// CHECK-NEXT:    func.return %[[O]]
// FLASH-LABEL: func.func @normalised_after_the_product
// FLASH-NEXT:    tta.fusion "attention"

// Not attention: a division by a constant elsewhere keeps NumPy's rounding.
func.func @plain_division(%x: tensor<64xf32>) -> tensor<64xf32> {
  %c = tta.constant 3.0 : f32 -> f32
  %y = tta.div %x, %c : tensor<64xf32>, f32 -> tensor<64xf32>
  func.return %y : tensor<64xf32>
}
// CHECK-LABEL: func.func @plain_division
// CHECK:         tta.div %x, %c
