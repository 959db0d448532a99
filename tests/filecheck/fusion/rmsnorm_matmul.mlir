// RUN: tinyton-opt %s -p tinyton-row-scale | filecheck %s --check-prefix=SCALE
// RUN: tinyton-opt %s -p tinyton-fuse | filecheck %s
// RUN: tinyton-opt %s -p tinyton-fuse,tinyton-fusion-to-kernels | filecheck %s --check-prefix=KERNEL

// RMSNorm before a projection is one kernel with it: `rmsnorm(x) @ w = (x @ w) * r` (tinyton-row-scale), and
// the matmul accumulates `sum(x * x)` in its K loop from the tiles of x it reads anyway (row_stats seeds
// the group, domain.row_prologue accepts it). Sibling q/k/v projections share the norm.

func.func @norm_qkv(%x: tensor<2x64xf32>, %wq: tensor<64x64xf32>, %wk: tensor<64x64xf32>, %wv: tensor<64x64xf32>) -> (tensor<2x64xf32>, tensor<2x64xf32>, tensor<2x64xf32>) {
  %sq = tta.mul %x, %x : tensor<2x64xf32>, tensor<2x64xf32> -> tensor<2x64xf32>
  %ms = tta.reduce_mean %sq axis = 1 keepdims : tensor<2x64xf32> -> tensor<2x1xf32>
  %eps = tta.constant 9.99999974E-6 : f32 -> f32
  %a = tta.add %ms, %eps : tensor<2x1xf32>, f32 -> tensor<2x1xf32>
  %r = tta.rsqrt %a : tensor<2x1xf32>
  %h = tta.mul %x, %r : tensor<2x64xf32>, tensor<2x1xf32> -> tensor<2x64xf32>
  %q = tta.matmul %h, %wq : tensor<2x64xf32>, tensor<64x64xf32> -> tensor<2x64xf32>
  %k = tta.matmul %h, %wk : tensor<2x64xf32>, tensor<64x64xf32> -> tensor<2x64xf32>
  %v = tta.matmul %h, %wv : tensor<2x64xf32>, tensor<64x64xf32> -> tensor<2x64xf32>
  func.return %q, %k, %v : tensor<2x64xf32>, tensor<2x64xf32>, tensor<2x64xf32>
}

// SCALE-LABEL: func.func @norm_qkv
// SCALE:         %r = tta.rsqrt %a
// SCALE-NEXT:    %0 = tta.matmul %x, %wq
// SCALE-NEXT:    %q = tta.mul %0, %r : tensor<2x64xf32>, tensor<2x1xf32> -> tensor<2x64xf32>
// SCALE-NEXT:    %1 = tta.matmul %x, %wk
// SCALE-NEXT:    %k = tta.mul %1, %r
// SCALE-NEXT:    %2 = tta.matmul %x, %wv
// SCALE-NEXT:    %v = tta.mul %2, %r
// SCALE-NEXT:    func.return %q, %k, %v

// CHECK-LABEL: func.func @norm_qkv
// CHECK-NEXT:    %q, %k, %v = tta.fusion "matmul_epilogue"(%x, %wq, %wk, %wv)
// CHECK:           %sq = tta.mul %x_1, %x_1
// CHECK-NEXT:      %ms = tta.reduce_mean %sq axis = 1 keepdims
// CHECK-NEXT:      %a = tta.add %ms, %eps
// CHECK-NEXT:      %r = tta.rsqrt %a
// CHECK-NEXT:      %0 = tta.matmul %x_1, %wq_1
// CHECK-NEXT:      %q_1 = tta.mul %0, %r
// CHECK:           tta.yield %q_1, %k_1, %v_1
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %q, %k, %v

func.func @norm_mlp(%x: tensor<1x32xf32>, %w1: tensor<32x128xf32>, %w2: tensor<128x32xf32>) -> tensor<1x32xf32> {
  %sq = tta.mul %x, %x : tensor<1x32xf32>, tensor<1x32xf32> -> tensor<1x32xf32>
  %ms = tta.reduce_mean %sq axis = 1 keepdims : tensor<1x32xf32> -> tensor<1x1xf32>
  %eps = tta.constant 9.99999974E-6 : f32 -> f32
  %a = tta.add %ms, %eps : tensor<1x1xf32>, f32 -> tensor<1x1xf32>
  %r = tta.rsqrt %a : tensor<1x1xf32>
  %h = tta.mul %x, %r : tensor<1x32xf32>, tensor<1x1xf32> -> tensor<1x32xf32>
  %u = tta.matmul %h, %w1 : tensor<1x32xf32>, tensor<32x128xf32> -> tensor<1x128xf32>
  %zero = tta.constant 0.000000e+00 : f32 -> f32
  %g = tta.maximum %u, %zero : tensor<1x128xf32>, f32 -> tensor<1x128xf32>
  %d = tta.matmul %g, %w2 : tensor<1x128xf32>, tensor<128x32xf32> -> tensor<1x32xf32>
  %y = tta.add %x, %d : tensor<1x32xf32>, tensor<1x32xf32> -> tensor<1x32xf32>
  func.return %y : tensor<1x32xf32>
}

// The MLP after the second norm: norm + up-projection + ReLU one kernel, down-projection + residual another.
// In the kernel the squares accumulate beside the dot, from the same loaded tile, masked rows neutral.

// CHECK-LABEL: func.func @norm_mlp
// CHECK-NEXT:    %g = tta.fusion "matmul_epilogue"(%x, %w1)
// CHECK:           tta.reduce_mean
// CHECK:           tta.matmul %x_1, %w1_1
// CHECK:           %g_1 = tta.maximum
// CHECK:         %y = tta.fusion "matmul_epilogue"(%g, %w2, %x)
// CHECK-NOT:     tta.fusion
// CHECK:         func.return %y

// KERNEL-LABEL: builtin.module @norm_mlp_1_matmul_epilogue
// KERNEL:         %{{.+}}, %[[SS:.+]] = scf.for %{{.+}} iter_args(%[[ACC:.+]] = %{{.+}}, %[[PART:.+]] = %{{.+}}) -> (tensor<16x64xf32>, tensor<16x32xf32>)
// KERNEL:           %[[A:.+]] = tt.load %{{.+}} mask %[[M:.+]] other
// KERNEL:           %[[D:.+]] = tt.dot %[[A]], %{{.+}}, %[[ACC]]
// KERNEL-NEXT:      %[[SQ:.+]] = tt.mul %[[A]], %[[A]] : tensor<16x32xf32>
// KERNEL:           %[[SEL:.+]] = tt.select %[[M]], %[[SQ]]
// KERNEL-NEXT:      %[[NEXT:.+]] = tt.add %[[PART]], %[[SEL]]
// KERNEL-NEXT:      scf.yield %[[D]], %[[NEXT]]
// KERNEL:         tt.reduce_sum %[[SS]] axis = 1 : tensor<16x32xf32> -> tensor<16xf32>
// KERNEL:         tt.constant 3.125000e-02
// KERNEL:         tt.reduce_sum %{{.+}} axis = 0 : tensor<16x1xf32> -> tensor<1xf32>
// KERNEL:         tt.rsqrt
// KERNEL:         tt.maximum
// KERNEL:         tt.store

func.func @norm_kept(%x: tensor<4x16xf32>, %w: tensor<16x16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>) {
  %sq = tta.mul %x, %x : tensor<4x16xf32>, tensor<4x16xf32> -> tensor<4x16xf32>
  %ms = tta.reduce_mean %sq axis = 1 keepdims : tensor<4x16xf32> -> tensor<4x1xf32>
  %eps = tta.constant 9.99999974E-6 : f32 -> f32
  %a = tta.add %ms, %eps : tensor<4x1xf32>, f32 -> tensor<4x1xf32>
  %r = tta.rsqrt %a : tensor<4x1xf32>
  %h = tta.mul %x, %r : tensor<4x16xf32>, tensor<4x1xf32> -> tensor<4x16xf32>
  %q = tta.matmul %h, %w : tensor<4x16xf32>, tensor<16x16xf32> -> tensor<4x16xf32>
  func.return %q, %h : tensor<4x16xf32>, tensor<4x16xf32>
}


// The normalised rows are a result too: they are computed anyway, so the scale stays before the matmul.

// SCALE-LABEL: func.func @norm_kept
// SCALE:         %h = tta.mul %x, %r
// SCALE-NEXT:    %q = tta.matmul %h, %w

// CHECK-LABEL: func.func @norm_kept
// CHECK-NEXT:    %h = tta.fusion "rmsnorm"(%x)
// CHECK:         %q = tta.fusion "matmul_epilogue"(%h, %w)
