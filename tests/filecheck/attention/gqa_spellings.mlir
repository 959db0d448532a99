// RUN: tinyton-opt %s -p tinyton-canonicalize-attention | filecheck %s
// RUN: tinyton-opt %s -p tinyton-flash-attention | filecheck %s --check-prefix=FLASH

// k and v repeated over the query heads of a group (np.repeat's step-0 slices and concatenation, or
// broadcast_to then reshape) become a broadcast along a group axis: q is reshaped to (H_kv, G, S, D), the
// attention is rebuilt over that batch shape, and its output reshaped back (tinyton/rewrites/attention_groups.py).

func.func @repeated(%q: tensor<4x32x16xf32>, %k: tensor<2x32x16xf32>, %v: tensor<2x32x16xf32>) -> tensor<4x32x16xf32> {
  %k0 = tta.slice %k start = [0, 0, 0] step = [0, 1, 1] : tensor<2x32x16xf32> -> tensor<2x32x16xf32>
  %k1 = tta.slice %k start = [1, 0, 0] step = [0, 1, 1] : tensor<2x32x16xf32> -> tensor<2x32x16xf32>
  %kr = tta.concatenate %k0, %k1 axis = 0 : tensor<2x32x16xf32>, tensor<2x32x16xf32> -> tensor<4x32x16xf32>
  %kt = tta.transpose %kr permutation = [0, 2, 1] : tensor<4x32x16xf32> -> tensor<4x16x32xf32>
  %s = tta.matmul %q, %kt : tensor<4x32x16xf32>, tensor<4x16x32xf32> -> tensor<4x32x32xf32>
  %m = tta.reduce_max %s axis = 2 keepdims : tensor<4x32x32xf32> -> tensor<4x32x1xf32>
  %d = tta.sub %s, %m : tensor<4x32x32xf32>, tensor<4x32x1xf32> -> tensor<4x32x32xf32>
  %e = tta.exp %d : tensor<4x32x32xf32>
  %l = tta.reduce_sum %e axis = 2 keepdims : tensor<4x32x32xf32> -> tensor<4x32x1xf32>
  %p = tta.div %e, %l : tensor<4x32x32xf32>, tensor<4x32x1xf32> -> tensor<4x32x32xf32>
  %v0 = tta.slice %v start = [0, 0, 0] step = [0, 1, 1] : tensor<2x32x16xf32> -> tensor<2x32x16xf32>
  %v1 = tta.slice %v start = [1, 0, 0] step = [0, 1, 1] : tensor<2x32x16xf32> -> tensor<2x32x16xf32>
  %vr = tta.concatenate %v0, %v1 axis = 0 : tensor<2x32x16xf32>, tensor<2x32x16xf32> -> tensor<4x32x16xf32>
  %o = tta.matmul %p, %vr : tensor<4x32x32xf32>, tensor<4x32x16xf32> -> tensor<4x32x16xf32>
  func.return %o : tensor<4x32x16xf32>
}
// CHECK-LABEL: func.func @repeated
// CHECK-NOT:     tta.concatenate
// CHECK-DAG:     %[[K:.*]] = tta.reshape %k : tensor<2x32x16xf32> -> tensor<2x1x32x16xf32>
// CHECK-DAG:     %[[V:.*]] = tta.reshape %v : tensor<2x32x16xf32> -> tensor<2x1x32x16xf32>
// CHECK-DAG:     %[[Q:.*]] = tta.reshape %q : tensor<4x32x16xf32> -> tensor<2x2x32x16xf32>
// CHECK:         %[[KT:.*]] = tta.transpose %[[K]] permutation = [0, 1, 3, 2] : tensor<2x1x32x16xf32> -> tensor<2x1x16x32xf32>
// CHECK-NEXT:    %[[S:.*]] = tta.matmul %[[Q]], %[[KT]] : {{.*}} -> tensor<2x2x32x32xf32>
// CHECK-NEXT:    %[[M:.*]] = tta.reduce_max %[[S]] axis = 3 keepdims
// CHECK:         %[[P:.*]] = tta.div
// CHECK-NEXT:    %[[O:.*]] = tta.matmul %[[P]], %[[V]] : tensor<2x2x32x32xf32>, tensor<2x1x32x16xf32> -> tensor<2x2x32x16xf32>
// CHECK-NEXT:    %[[OUT:.*]] = tta.reshape %[[O]] : tensor<2x2x32x16xf32> -> tensor<4x32x16xf32>
// CHECK-NEXT:    func.return %[[OUT]]
// FLASH-LABEL: func.func @repeated
// FLASH:         tta.fusion "attention"({{.*}}) : ({{.*}}) -> tensor<4x32x16xf32>
// FLASH-NOT:     tta.fusion

func.func @broadcast_then_reshape(%q: tensor<4x32x16xf32>, %k: tensor<2x32x16xf32>, %v: tensor<2x32x16xf32>) -> tensor<4x32x16xf32> {
  %k1 = tta.reshape %k : tensor<2x32x16xf32> -> tensor<2x1x32x16xf32>
  %kb = tta.broadcast_to %k1 : tensor<2x1x32x16xf32> -> tensor<2x2x32x16xf32>
  %kr = tta.reshape %kb : tensor<2x2x32x16xf32> -> tensor<4x32x16xf32>
  %v1 = tta.reshape %v : tensor<2x32x16xf32> -> tensor<2x1x32x16xf32>
  %vb = tta.broadcast_to %v1 : tensor<2x1x32x16xf32> -> tensor<2x2x32x16xf32>
  %vr = tta.reshape %vb : tensor<2x2x32x16xf32> -> tensor<4x32x16xf32>
  %kt = tta.transpose %kr permutation = [0, 2, 1] : tensor<4x32x16xf32> -> tensor<4x16x32xf32>
  %s = tta.matmul %q, %kt : tensor<4x32x16xf32>, tensor<4x16x32xf32> -> tensor<4x32x32xf32>
  %m = tta.reduce_max %s axis = 2 keepdims : tensor<4x32x32xf32> -> tensor<4x32x1xf32>
  %d = tta.sub %s, %m : tensor<4x32x32xf32>, tensor<4x32x1xf32> -> tensor<4x32x32xf32>
  %e = tta.exp %d : tensor<4x32x32xf32>
  %l = tta.reduce_sum %e axis = 2 keepdims : tensor<4x32x32xf32> -> tensor<4x32x1xf32>
  %p = tta.div %e, %l : tensor<4x32x32xf32>, tensor<4x32x1xf32> -> tensor<4x32x32xf32>
  %o = tta.matmul %p, %vr : tensor<4x32x32xf32>, tensor<4x32x16xf32> -> tensor<4x32x16xf32>
  func.return %o : tensor<4x32x16xf32>
}
// CHECK-LABEL: func.func @broadcast_then_reshape
// CHECK-NOT:     tta.broadcast_to
// CHECK:         %[[Q:.*]] = tta.reshape %q : tensor<4x32x16xf32> -> tensor<2x2x32x16xf32>
// CHECK:         %[[KT:.*]] = tta.transpose %k1 permutation = [0, 1, 3, 2]
// CHECK-NEXT:    tta.matmul %[[Q]], %[[KT]]
// CHECK:         tta.matmul %{{.*}}, %v1 : tensor<2x2x32x32xf32>, tensor<2x1x32x16xf32> -> tensor<2x2x32x16xf32>
// FLASH-LABEL: func.func @broadcast_then_reshape
// FLASH:         tta.fusion "attention"
// FLASH-NOT:     tta.fusion

// Not attention (no softmax reads the product): a repeated operand stays as written.
func.func @plain_matmul(%q: tensor<4x32x16xf32>, %k: tensor<2x16x32xf32>) -> tensor<4x32x32xf32> {
  %k0 = tta.slice %k start = [0, 0, 0] step = [0, 1, 1] : tensor<2x16x32xf32> -> tensor<2x16x32xf32>
  %k1 = tta.slice %k start = [1, 0, 0] step = [0, 1, 1] : tensor<2x16x32xf32> -> tensor<2x16x32xf32>
  %kr = tta.concatenate %k0, %k1 axis = 0 : tensor<2x16x32xf32>, tensor<2x16x32xf32> -> tensor<4x16x32xf32>
  %s = tta.matmul %q, %kr : tensor<4x32x16xf32>, tensor<4x16x32xf32> -> tensor<4x32x32xf32>
  func.return %s : tensor<4x32x32xf32>
}
// CHECK-LABEL: func.func @plain_matmul
// CHECK:         %kr = tta.concatenate %k0, %k1
// CHECK-NEXT:    %s = tta.matmul %q, %kr

// ALiBi over repeated keys: the bias is rebuilt over the grouped heads from its slopes reshaped (not the [H, S, S]
// bias reshaped), so the flash rule still computes it from the indices in the kernel.
func.func @repeated_alibi(%q: tensor<4x32x16xf32>, %k: tensor<2x32x16xf32>, %v: tensor<2x32x16xf32>, %slope: tensor<4x1x1xf32>) -> tensor<4x32x16xf32> {
  %a0 = tta.arange 0 to 32 : tensor<32xi32>
  %i = tta.reshape %a0 : tensor<32xi32> -> tensor<32x1xi32>
  %a1 = tta.arange 0 to 32 : tensor<32xi32>
  %j = tta.reshape %a1 : tensor<32xi32> -> tensor<1x32xi32>
  %dist = tta.sub %j, %i : tensor<1x32xi32>, tensor<32x1xi32> -> tensor<32x32xi32>
  %distf = tta.cast %dist : tensor<32x32xi32> -> tensor<32x32xf32>
  %bias = tta.mul %slope, %distf : tensor<4x1x1xf32>, tensor<32x32xf32> -> tensor<4x32x32xf32>
  %k0 = tta.slice %k start = [0, 0, 0] step = [0, 1, 1] : tensor<2x32x16xf32> -> tensor<2x32x16xf32>
  %k1 = tta.slice %k start = [1, 0, 0] step = [0, 1, 1] : tensor<2x32x16xf32> -> tensor<2x32x16xf32>
  %kr = tta.concatenate %k0, %k1 axis = 0 : tensor<2x32x16xf32>, tensor<2x32x16xf32> -> tensor<4x32x16xf32>
  %kt = tta.transpose %kr permutation = [0, 2, 1] : tensor<4x32x16xf32> -> tensor<4x16x32xf32>
  %qk = tta.matmul %q, %kt : tensor<4x32x16xf32>, tensor<4x16x32xf32> -> tensor<4x32x32xf32>
  %s = tta.add %qk, %bias : tensor<4x32x32xf32>, tensor<4x32x32xf32> -> tensor<4x32x32xf32>
  %m = tta.reduce_max %s axis = 2 keepdims : tensor<4x32x32xf32> -> tensor<4x32x1xf32>
  %d = tta.sub %s, %m : tensor<4x32x32xf32>, tensor<4x32x1xf32> -> tensor<4x32x32xf32>
  %e = tta.exp %d : tensor<4x32x32xf32>
  %l = tta.reduce_sum %e axis = 2 keepdims : tensor<4x32x32xf32> -> tensor<4x32x1xf32>
  %p = tta.div %e, %l : tensor<4x32x32xf32>, tensor<4x32x1xf32> -> tensor<4x32x32xf32>
  %v0 = tta.slice %v start = [0, 0, 0] step = [0, 1, 1] : tensor<2x32x16xf32> -> tensor<2x32x16xf32>
  %v1 = tta.slice %v start = [1, 0, 0] step = [0, 1, 1] : tensor<2x32x16xf32> -> tensor<2x32x16xf32>
  %vr = tta.concatenate %v0, %v1 axis = 0 : tensor<2x32x16xf32>, tensor<2x32x16xf32> -> tensor<4x32x16xf32>
  %o = tta.matmul %p, %vr : tensor<4x32x32xf32>, tensor<4x32x16xf32> -> tensor<4x32x16xf32>
  func.return %o : tensor<4x32x16xf32>
}
// CHECK-LABEL: func.func @repeated_alibi
// CHECK:         %[[SLOPE:.*]] = tta.reshape %slope : tensor<4x1x1xf32> -> tensor<2x2x1x1xf32>
// CHECK:         %[[BIAS:.*]] = tta.mul %[[SLOPE]], %distf : tensor<2x2x1x1xf32>, tensor<32x32xf32> -> tensor<2x2x32x32xf32>
// CHECK-NOT:     tta.reshape %bias
// CHECK:         tta.add {{.*}}, %[[BIAS]] : tensor<2x2x32x32xf32>, tensor<2x2x32x32xf32> -> tensor<2x2x32x32xf32>
// FLASH-LABEL: func.func @repeated_alibi
// FLASH:         tta.fusion "attention"({{.*}}) : ({{.*}}tensor<2x2x1x1xf32>{{.*}}) -> tensor<4x32x16xf32>
// FLASH-NOT:     tta.fusion
