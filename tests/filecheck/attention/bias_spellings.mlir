// RUN: tinyton-opt %s -p tinyton-canonicalize-attention | filecheck %s
// RUN: tinyton-opt %s -p tinyton-flash-attention | filecheck %s --check-prefix=FLASH

// An additive bias loses its terms that are constant along the keys when only a softmax reads the scores
// (tinyton/rewrites/attention_bias.py): ALiBi's `slope[h] * (j - i)` becomes `slope[h] * j`, which the attention
// reads as [H, 1, S] where it read [H, S, S].

func.func @alibi(%q: tensor<4x32x16xf32>, %kt: tensor<4x16x32xf32>, %v: tensor<4x32x16xf32>, %slope: tensor<4x1x1xf32>) -> tensor<4x32x16xf32> {
  %a0 = tta.arange 0 to 32 : tensor<32xi32>
  %i = tta.reshape %a0 : tensor<32xi32> -> tensor<32x1xi32>
  %a1 = tta.arange 0 to 32 : tensor<32xi32>
  %j = tta.reshape %a1 : tensor<32xi32> -> tensor<1x32xi32>
  %dist = tta.sub %j, %i : tensor<1x32xi32>, tensor<32x1xi32> -> tensor<32x32xi32>
  %distf = tta.cast %dist : tensor<32x32xi32> -> tensor<32x32xf32>
  %bias = tta.mul %slope, %distf : tensor<4x1x1xf32>, tensor<32x32xf32> -> tensor<4x32x32xf32>
  %qk = tta.matmul %q, %kt : tensor<4x32x16xf32>, tensor<4x16x32xf32> -> tensor<4x32x32xf32>
  %s = tta.add %qk, %bias : tensor<4x32x32xf32>, tensor<4x32x32xf32> -> tensor<4x32x32xf32>
  %m = tta.reduce_max %s axis = 2 keepdims : tensor<4x32x32xf32> -> tensor<4x32x1xf32>
  %d = tta.sub %s, %m : tensor<4x32x32xf32>, tensor<4x32x1xf32> -> tensor<4x32x32xf32>
  %e = tta.exp %d : tensor<4x32x32xf32>
  %l = tta.reduce_sum %e axis = 2 keepdims : tensor<4x32x32xf32> -> tensor<4x32x1xf32>
  %p = tta.div %e, %l : tensor<4x32x32xf32>, tensor<4x32x1xf32> -> tensor<4x32x32xf32>
  %o = tta.matmul %p, %v : tensor<4x32x32xf32>, tensor<4x32x16xf32> -> tensor<4x32x16xf32>
  func.return %o : tensor<4x32x16xf32>
}
// CHECK-LABEL: func.func @alibi
// CHECK:         %[[JF:.*]] = tta.cast %j : tensor<1x32xi32> -> tensor<1x32xf32>
// CHECK-NEXT:    %[[B:.*]] = tta.mul %slope, %[[JF]] : tensor<4x1x1xf32>, tensor<1x32xf32> -> tensor<4x1x32xf32>
// CHECK-NEXT:    %s = tta.add %qk, %[[B]] : tensor<4x32x32xf32>, tensor<4x1x32xf32> -> tensor<4x32x32xf32>
// CHECK-NOT:     tta.sub %j, %i
// FLASH-LABEL: func.func @alibi
// FLASH:         %[[B:.*]] = tta.mul {{.*}} -> tensor<4x1x32xf32>
// FLASH-NEXT:    %o = tta.fusion "attention"(%q, %kt, %[[B]], %v) : ({{.*}}, tensor<4x1x32xf32>, {{.*}})

// The program also returns the rows' logsumexp, which moves with a shift of the rows: the bias stays whole.
func.func @alibi_with_logsumexp(%q: tensor<32x16xf32>, %kt: tensor<16x32xf32>, %slope: tensor<1x1xf32>) -> (tensor<32x32xf32>, tensor<32x1xf32>) {
  %a0 = tta.arange 0 to 32 : tensor<32xi32>
  %i = tta.reshape %a0 : tensor<32xi32> -> tensor<32x1xi32>
  %a1 = tta.arange 0 to 32 : tensor<32xi32>
  %j = tta.reshape %a1 : tensor<32xi32> -> tensor<1x32xi32>
  %dist = tta.sub %j, %i : tensor<1x32xi32>, tensor<32x1xi32> -> tensor<32x32xi32>
  %distf = tta.cast %dist : tensor<32x32xi32> -> tensor<32x32xf32>
  %bias = tta.mul %slope, %distf : tensor<1x1xf32>, tensor<32x32xf32> -> tensor<32x32xf32>
  %qk = tta.matmul %q, %kt : tensor<32x16xf32>, tensor<16x32xf32> -> tensor<32x32xf32>
  %s = tta.add %qk, %bias : tensor<32x32xf32>, tensor<32x32xf32> -> tensor<32x32xf32>
  %m = tta.reduce_max %s axis = 1 keepdims : tensor<32x32xf32> -> tensor<32x1xf32>
  %d = tta.sub %s, %m : tensor<32x32xf32>, tensor<32x1xf32> -> tensor<32x32xf32>
  %e = tta.exp %d : tensor<32x32xf32>
  %l = tta.reduce_sum %e axis = 1 keepdims : tensor<32x32xf32> -> tensor<32x1xf32>
  %p = tta.div %e, %l : tensor<32x32xf32>, tensor<32x1xf32> -> tensor<32x32xf32>
  %log = tta.log %l : tensor<32x1xf32>
  %lse = tta.add %m, %log : tensor<32x1xf32>, tensor<32x1xf32> -> tensor<32x1xf32>
  func.return %p, %lse : tensor<32x32xf32>, tensor<32x1xf32>
}
// CHECK-LABEL: func.func @alibi_with_logsumexp
// CHECK:         %s = tta.add %qk, %bias

// A clamp after the bias (`maximum(s, floor)`) does not keep a shift of the rows a shift: the bias stays whole.
func.func @alibi_clamped(%q: tensor<32x16xf32>, %kt: tensor<16x32xf32>, %v: tensor<32x16xf32>, %slope: tensor<1x1xf32>) -> tensor<32x16xf32> {
  %a0 = tta.arange 0 to 32 : tensor<32xi32>
  %i = tta.reshape %a0 : tensor<32xi32> -> tensor<32x1xi32>
  %a1 = tta.arange 0 to 32 : tensor<32xi32>
  %j = tta.reshape %a1 : tensor<32xi32> -> tensor<1x32xi32>
  %dist = tta.sub %j, %i : tensor<1x32xi32>, tensor<32x1xi32> -> tensor<32x32xi32>
  %distf = tta.cast %dist : tensor<32x32xi32> -> tensor<32x32xf32>
  %bias = tta.mul %slope, %distf : tensor<1x1xf32>, tensor<32x32xf32> -> tensor<32x32xf32>
  %qk = tta.matmul %q, %kt : tensor<32x16xf32>, tensor<16x32xf32> -> tensor<32x32xf32>
  %s = tta.add %qk, %bias : tensor<32x32xf32>, tensor<32x32xf32> -> tensor<32x32xf32>
  %floor = tta.constant -1.000000e+01 : f32 -> f32
  %c = tta.maximum %s, %floor : tensor<32x32xf32>, f32 -> tensor<32x32xf32>
  %m = tta.reduce_max %c axis = 1 keepdims : tensor<32x32xf32> -> tensor<32x1xf32>
  %d = tta.sub %c, %m : tensor<32x32xf32>, tensor<32x1xf32> -> tensor<32x32xf32>
  %e = tta.exp %d : tensor<32x32xf32>
  %l = tta.reduce_sum %e axis = 1 keepdims : tensor<32x32xf32> -> tensor<32x1xf32>
  %p = tta.div %e, %l : tensor<32x32xf32>, tensor<32x1xf32> -> tensor<32x32xf32>
  %o = tta.matmul %p, %v : tensor<32x32xf32>, tensor<32x16xf32> -> tensor<32x16xf32>
  func.return %o : tensor<32x16xf32>
}
// CHECK-LABEL: func.func @alibi_clamped
// CHECK:         %s = tta.add %qk, %bias
