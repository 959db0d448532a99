// RUN: tinyton-opt %s -p tinyton-canonicalize-attention | filecheck %s
// RUN: tinyton-opt %s -p tinyton-flash-attention | filecheck %s --check-prefix=FLASH

// Every spelling of a mask becomes `where(keep, s, -inf)` after the scale (tinyton/rewrites/attention_masks.py),
// the form whose causal `keep` the kernel's KV loop stops at; one attention region each.

// The dropped keys chosen: where(i < j, -inf, s) is where(~(i < j), s, -inf).
func.func @dropped_keys_chosen(%q: tensor<32x16xf32>, %kt: tensor<16x32xf32>, %v: tensor<32x16xf32>) -> tensor<32x16xf32> {
  %a0 = tta.arange 0 to 32 : tensor<32xi32>
  %i = tta.reshape %a0 : tensor<32xi32> -> tensor<32x1xi32>
  %a1 = tta.arange 0 to 32 : tensor<32xi32>
  %j = tta.reshape %a1 : tensor<32xi32> -> tensor<1x32xi32>
  %drop = tta.cmp "lt", %i, %j : tensor<32x1xi32>, tensor<1x32xi32> -> tensor<32x32xi1>
  %qk = tta.matmul %q, %kt : tensor<32x16xf32>, tensor<16x32xf32> -> tensor<32x32xf32>
  %ninf = tta.constant 0xff800000 : f32 -> f32
  %s = tta.where %drop, %ninf, %qk : tensor<32x32xi1>, f32, tensor<32x32xf32> -> tensor<32x32xf32>
  %m = tta.reduce_max %s axis = 1 keepdims : tensor<32x32xf32> -> tensor<32x1xf32>
  %d = tta.sub %s, %m : tensor<32x32xf32>, tensor<32x1xf32> -> tensor<32x32xf32>
  %e = tta.exp %d : tensor<32x32xf32>
  %l = tta.reduce_sum %e axis = 1 keepdims : tensor<32x32xf32> -> tensor<32x1xf32>
  %p = tta.div %e, %l : tensor<32x32xf32>, tensor<32x1xf32> -> tensor<32x32xf32>
  %o = tta.matmul %p, %v : tensor<32x32xf32>, tensor<32x16xf32> -> tensor<32x16xf32>
  func.return %o : tensor<32x16xf32>
}
// CHECK-LABEL: func.func @dropped_keys_chosen
// CHECK:         %[[TRUE:.*]] = tta.constant true -> i1
// CHECK-NEXT:    %[[KEEP:.*]] = tta.xor %drop, %[[TRUE]]
// CHECK-NEXT:    %[[S:.*]] = tta.where %[[KEEP]], %qk, %ninf
// CHECK-NEXT:    %m = tta.reduce_max %[[S]]
// FLASH-LABEL: func.func @dropped_keys_chosen
// FLASH-NEXT:    %o = tta.fusion "attention"(%q, %kt, %v)

// An additive -inf mask (nn.Transformer's triu(full(-inf), 1)) keeps the scores where it is 0.
func.func @additive(%q: tensor<32x16xf32>, %kt: tensor<16x32xf32>, %v: tensor<32x16xf32>) -> tensor<32x16xf32> {
  %qk = tta.matmul %q, %kt : tensor<32x16xf32>, tensor<16x32xf32> -> tensor<32x32xf32>
  %ninf = tta.constant 0xff800000 : f32 -> f32
  %full = tta.broadcast_to %ninf : f32 -> tensor<32x32xf32>
  %a0 = tta.arange 0 to 32 : tensor<32xi32>
  %i = tta.reshape %a0 : tensor<32xi32> -> tensor<32x1xi32>
  %a1 = tta.arange 0 to 32 : tensor<32xi32>
  %j = tta.reshape %a1 : tensor<32xi32> -> tensor<1x32xi32>
  %diag = tta.sub %j, %i : tensor<1x32xi32>, tensor<32x1xi32> -> tensor<32x32xi32>
  %one = tta.constant 1 : i32 -> i32
  %above = tta.cmp "ge", %diag, %one : tensor<32x32xi32>, i32 -> tensor<32x32xi1>
  %zero = tta.constant 0.0 : f32 -> f32
  %mask = tta.where %above, %full, %zero : tensor<32x32xi1>, tensor<32x32xf32>, f32 -> tensor<32x32xf32>
  %s = tta.add %qk, %mask : tensor<32x32xf32>, tensor<32x32xf32> -> tensor<32x32xf32>
  %m = tta.reduce_max %s axis = 1 keepdims : tensor<32x32xf32> -> tensor<32x1xf32>
  %d = tta.sub %s, %m : tensor<32x32xf32>, tensor<32x1xf32> -> tensor<32x32xf32>
  %e = tta.exp %d : tensor<32x32xf32>
  %l = tta.reduce_sum %e axis = 1 keepdims : tensor<32x32xf32> -> tensor<32x1xf32>
  %p = tta.div %e, %l : tensor<32x32xf32>, tensor<32x1xf32> -> tensor<32x32xf32>
  %o = tta.matmul %p, %v : tensor<32x32xf32>, tensor<32x16xf32> -> tensor<32x16xf32>
  func.return %o : tensor<32x16xf32>
}
// CHECK-LABEL: func.func @additive
// CHECK:         %mask = tta.where %above, %full, %zero
// CHECK-NEXT:    %[[ZERO:.*]] = tta.constant 0.000000e+00 : f32 -> f32
// CHECK-NEXT:    %[[KEEP:.*]] = tta.cmp "eq", %mask, %[[ZERO]]
// CHECK-NEXT:    %[[NINF:.*]] = tta.constant 0xff800000 : f32 -> f32
// CHECK-NEXT:    %[[S:.*]] = tta.where %[[KEEP]], %qk, %[[NINF]]
// CHECK-NEXT:    %m = tta.reduce_max %[[S]]
// CHECK-NOT:     tta.add %qk
// FLASH-LABEL: func.func @additive
// FLASH-NEXT:    %o = tta.fusion "attention"(%q, %kt, %v)

// The scale after the mask moves next to q @ kᵀ (-inf * 0.25 is -inf), where the kernel folds it.
func.func @scale_after_the_mask(%q: tensor<32x16xf32>, %kt: tensor<16x32xf32>, %v: tensor<32x16xf32>) -> tensor<32x16xf32> {
  %a0 = tta.arange 0 to 32 : tensor<32xi32>
  %i = tta.reshape %a0 : tensor<32xi32> -> tensor<32x1xi32>
  %a1 = tta.arange 0 to 32 : tensor<32xi32>
  %j = tta.reshape %a1 : tensor<32xi32> -> tensor<1x32xi32>
  %keep = tta.cmp "ge", %i, %j : tensor<32x1xi32>, tensor<1x32xi32> -> tensor<32x32xi1>
  %qk = tta.matmul %q, %kt : tensor<32x16xf32>, tensor<16x32xf32> -> tensor<32x32xf32>
  %ninf = tta.constant 0xff800000 : f32 -> f32
  %masked = tta.where %keep, %qk, %ninf : tensor<32x32xi1>, tensor<32x32xf32>, f32 -> tensor<32x32xf32>
  %c = tta.constant 4.0 : f32 -> f32
  %s = tta.div %masked, %c : tensor<32x32xf32>, f32 -> tensor<32x32xf32>
  %m = tta.reduce_max %s axis = 1 keepdims : tensor<32x32xf32> -> tensor<32x1xf32>
  %d = tta.sub %s, %m : tensor<32x32xf32>, tensor<32x1xf32> -> tensor<32x32xf32>
  %e = tta.exp %d : tensor<32x32xf32>
  %l = tta.reduce_sum %e axis = 1 keepdims : tensor<32x32xf32> -> tensor<32x1xf32>
  %p = tta.div %e, %l : tensor<32x32xf32>, tensor<32x1xf32> -> tensor<32x32xf32>
  %o = tta.matmul %p, %v : tensor<32x32xf32>, tensor<32x16xf32> -> tensor<32x16xf32>
  func.return %o : tensor<32x16xf32>
}
// CHECK-LABEL: func.func @scale_after_the_mask
// CHECK:         %[[C:.*]] = tta.constant 2.500000e-01 : f32 -> f32
// CHECK-NEXT:    %[[SCALED:.*]] = tta.mul %qk, %[[C]]
// CHECK-NEXT:    %[[S:.*]] = tta.where %keep, %[[SCALED]], %ninf
// CHECK-NEXT:    %m = tta.reduce_max %[[S]]
// FLASH-LABEL: func.func @scale_after_the_mask
// FLASH-NEXT:    %o = tta.fusion "attention"(%q, %kt, %v)

// A runtime scale of unknown sign stays after the mask (-inf times a negative scale is +inf).
func.func @runtime_scale_after_the_mask(%qk: tensor<32x32xf32>, %keep: tensor<32x32xi1>, %c: tensor<1xf32>) -> tensor<32x32xf32> {
  %ninf = tta.constant 0xff800000 : f32 -> f32
  %masked = tta.where %keep, %qk, %ninf : tensor<32x32xi1>, tensor<32x32xf32>, f32 -> tensor<32x32xf32>
  %s = tta.mul %masked, %c : tensor<32x32xf32>, tensor<1xf32> -> tensor<32x32xf32>
  %m = tta.reduce_max %s axis = 1 keepdims : tensor<32x32xf32> -> tensor<32x1xf32>
  %d = tta.sub %s, %m : tensor<32x32xf32>, tensor<32x1xf32> -> tensor<32x32xf32>
  %e = tta.exp %d : tensor<32x32xf32>
  func.return %e : tensor<32x32xf32>
}
// CHECK-LABEL: func.func @runtime_scale_after_the_mask
// CHECK:         %masked = tta.where %keep, %qk, %ninf
// CHECK-NEXT:    %s = tta.mul %masked, %c
