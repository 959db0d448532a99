// RUN: tinyton-opt %s -p tinyton-fuse | filecheck %s
// RUN: tinyton-opt %s -p tinyton-fuse,tinyton-fusion-to-kernels | filecheck %s --check-prefix=KERNEL

// A decode step's mask `arange(T) <= pos` with `pos` a one-element input: an index mask with a run-time
// term, computed inside the attention kernel (pos is read there) instead of a kernel of its own.

func.func @decode_mask(%q: tensor<4x1x4xf32>, %k: tensor<4x16x4xf32>, %v: tensor<4x16x4xf32>, %pos: tensor<1xi32>) -> tensor<4x1x4xf32> {
  %c = tta.constant 5.000000e-01 : f32 -> f32
  %ninf = tta.constant 0xff800000 : f32 -> f32
  %t = tta.arange 0 to 16 : tensor<16xi32>
  %visible = tta.cmp "le", %t, %pos : tensor<16xi32>, tensor<1xi32> -> tensor<16xi1>
  %kt = tta.transpose %k permutation = [0, 2, 1] : tensor<4x16x4xf32> -> tensor<4x4x16xf32>
  %s0 = tta.matmul %q, %kt : tensor<4x1x4xf32>, tensor<4x4x16xf32> -> tensor<4x1x16xf32>
  %s1 = tta.mul %s0, %c : tensor<4x1x16xf32>, f32 -> tensor<4x1x16xf32>
  %s = tta.where %visible, %s1, %ninf : tensor<16xi1>, tensor<4x1x16xf32>, f32 -> tensor<4x1x16xf32>
  %m = tta.reduce_max %s axis = 2 keepdims : tensor<4x1x16xf32> -> tensor<4x1x1xf32>
  %d = tta.sub %s, %m : tensor<4x1x16xf32>, tensor<4x1x1xf32> -> tensor<4x1x16xf32>
  %e = tta.exp %d : tensor<4x1x16xf32>
  %l = tta.reduce_sum %e axis = 2 keepdims : tensor<4x1x16xf32> -> tensor<4x1x1xf32>
  %p = tta.div %e, %l : tensor<4x1x16xf32>, tensor<4x1x1xf32> -> tensor<4x1x16xf32>
  %o = tta.matmul %p, %v : tensor<4x1x16xf32>, tensor<4x16x4xf32> -> tensor<4x1x4xf32>
  func.return %o : tensor<4x1x4xf32>
}

// CHECK-LABEL: func.func @decode_mask
// CHECK-NEXT:    %o = tta.fusion "attention"(%k, %pos, %q, %v)
// CHECK:           tta.arange
// CHECK:           tta.cmp "le"
// CHECK-NOT:     tta.fusion

// pos is read once, before the KV loops (the key limit that ends them and every block's mask use that read; each
// block read it again until 2026-12-03, its mask then waiting on that load):
// KERNEL-LABEL: func.func @decode_mask_0_attention
// KERNEL:         tt.load %pos : !tt.ptr<i32> -> i32
// KERNEL-NOT:     tt.load %pos
// KERNEL:         scf.for
// KERNEL-NOT:     tt.load %pos
// KERNEL:         func.return

// Split into chunks (flash-decoding), the chunks share out the keys up to pos, not the whole cache: the chunk
// length is computed from pos's key limit (its blocks over the chunk count, in whole blocks), so at pos 511 of
// 1024 keys every chunk walks keys, none is empty.
// KERNEL-LABEL: func.func @decode_split_1_attention
// KERNEL:         %[[POS:.+]] = tt.load %pos : !tt.ptr<i32> -> i32
// KERNEL:         %[[PID:.+]] = tt.program_id 2 : i32
// KERNEL-NEXT:    %[[START:.+]] = tt.mul %[[PID]], %[[CHUNK:.+]] : i32
// KERNEL:         scf.for %{{.+}} = %[[START]] to
// CHECK-LABEL: func.func @decode_split
// CHECK-NEXT:    %o = tta.fusion "attention"(%k, %pos, %q, %v)

func.func @decode_split(%q: tensor<4x1x4xf32>, %k: tensor<4x1024x4xf32>, %v: tensor<4x1024x4xf32>, %pos: tensor<1xi32>) -> tensor<4x1x4xf32> {
  %c = tta.constant 5.000000e-01 : f32 -> f32
  %ninf = tta.constant 0xff800000 : f32 -> f32
  %t = tta.arange 0 to 1024 : tensor<1024xi32>
  %visible = tta.cmp "le", %t, %pos : tensor<1024xi32>, tensor<1xi32> -> tensor<1024xi1>
  %kt = tta.transpose %k permutation = [0, 2, 1] : tensor<4x1024x4xf32> -> tensor<4x4x1024xf32>
  %s0 = tta.matmul %q, %kt : tensor<4x1x4xf32>, tensor<4x4x1024xf32> -> tensor<4x1x1024xf32>
  %s1 = tta.mul %s0, %c : tensor<4x1x1024xf32>, f32 -> tensor<4x1x1024xf32>
  %s = tta.where %visible, %s1, %ninf : tensor<1024xi1>, tensor<4x1x1024xf32>, f32 -> tensor<4x1x1024xf32>
  %m = tta.reduce_max %s axis = 2 keepdims : tensor<4x1x1024xf32> -> tensor<4x1x1xf32>
  %d = tta.sub %s, %m : tensor<4x1x1024xf32>, tensor<4x1x1xf32> -> tensor<4x1x1024xf32>
  %e = tta.exp %d : tensor<4x1x1024xf32>
  %l = tta.reduce_sum %e axis = 2 keepdims : tensor<4x1x1024xf32> -> tensor<4x1x1xf32>
  %p = tta.div %e, %l : tensor<4x1x1024xf32>, tensor<4x1x1xf32> -> tensor<4x1x1024xf32>
  %o = tta.matmul %p, %v : tensor<4x1x1024xf32>, tensor<4x1024x4xf32> -> tensor<4x1x4xf32>
  func.return %o : tensor<4x1x4xf32>
}
