// RUN: tinyton-opt %s -p tinyton-split-heads | filecheck %s
// RUN: tinyton-opt %s -p tinyton-fuse | filecheck %s --check-prefix=FUSE
// RUN: tinyton-opt %s -p tinyton-fuse,tinyton-fusion-to-kernels | filecheck %s --check-prefix=KERNEL

// A decode step's key projection: `k = heads(x @ w.T)` (2 heads of 8), RoPE (`k * cos + rotate_half(k) * sin`),
// the rounded row stored into the cache at `pos`. tinyton-split-heads makes the projection a product batched
// over the heads, laid out as `k` is; RoPE's halves are then windows of the product's columns, which for a
// product of one row are products of their own with shifted windows of `w` (tinyton-push-slices), siblings
// of the first. One kernel: three dots per tile, the rotation and the store of the row.

func.func @key_row(%x: tensor<2x1x32xf32>, %w: tensor<16x32xbf16>, %cos: tensor<1x8xf32>, %sin: tensor<1x8xf32>, %cache: tensor<2x2x16x8xbf16>, %pos: tensor<1xi32>) -> tensor<2x2x16x8xbf16> attributes {tta.updates = array<i64: 4>} {
  %xb = tta.cast %x : tensor<2x1x32xf32> -> tensor<2x1x32xbf16>
  %wt = tta.transpose %w permutation = [1, 0] : tensor<16x32xbf16> -> tensor<32x16xbf16>
  %p = tta.matmul %xb, %wt : tensor<2x1x32xbf16>, tensor<32x16xbf16> -> tensor<2x1x16xbf16>
  %pf = tta.cast %p : tensor<2x1x16xbf16> -> tensor<2x1x16xf32>
  %split = tta.reshape %pf : tensor<2x1x16xf32> -> tensor<2x1x2x8xf32>
  %k = tta.transpose %split permutation = [0, 2, 1, 3] : tensor<2x1x2x8xf32> -> tensor<2x2x1x8xf32>
  %hi = tta.slice %k start = [0, 0, 0, 4] step = [1, 1, 1, 1] : tensor<2x2x1x8xf32> -> tensor<2x2x1x4xf32>
  %neg = tta.neg %hi : tensor<2x2x1x4xf32>
  %lo = tta.slice %k start = [0, 0, 0, 0] step = [1, 1, 1, 1] : tensor<2x2x1x8xf32> -> tensor<2x2x1x4xf32>
  %rot = tta.concatenate %neg, %lo axis = 3 : tensor<2x2x1x4xf32>, tensor<2x2x1x4xf32> -> tensor<2x2x1x8xf32>
  %kc = tta.mul %k, %cos : tensor<2x2x1x8xf32>, tensor<1x8xf32> -> tensor<2x2x1x8xf32>
  %rs = tta.mul %rot, %sin : tensor<2x2x1x8xf32>, tensor<1x8xf32> -> tensor<2x2x1x8xf32>
  %rope = tta.add %kc, %rs : tensor<2x2x1x8xf32>, tensor<2x2x1x8xf32> -> tensor<2x2x1x8xf32>
  %row = tta.cast %rope : tensor<2x2x1x8xf32> -> tensor<2x2x1x8xbf16>
  %new = tta.put %cache[%pos : tensor<1xi32>] = %row start = [0, 0, 0, 0] step = [1, 1, 1, 1] axis 2 : tensor<2x2x16x8xbf16>, tensor<2x2x1x8xbf16>
  func.return %new : tensor<2x2x16x8xbf16>
}

// CHECK-LABEL: func.func @key_row
// CHECK:         %[[X:.+]] = tta.reshape %xb : tensor<2x1x32xbf16> -> tensor<2x1x1x32xbf16>
// CHECK-NEXT:    %[[W:.+]] = tta.reshape %w : tensor<16x32xbf16> -> tensor<2x8x32xbf16>
// CHECK-NEXT:    %[[WT:.+]] = tta.transpose %[[W]] permutation = [0, 2, 1] : tensor<2x8x32xbf16> -> tensor<2x32x8xbf16>
// CHECK-NEXT:    %[[P:.+]] = tta.matmul %[[X]], %[[WT]] : tensor<2x1x1x32xbf16>, tensor<2x32x8xbf16> -> tensor<2x2x1x8xbf16>
// CHECK-NEXT:    %k = tta.cast %[[P]] : tensor<2x2x1x8xbf16> -> tensor<2x2x1x8xf32>
// CHECK-NOT:     tta.matmul

// FUSE-LABEL: func.func @key_row
// FUSE-NEXT:    %new = tta.fusion "matmul_epilogue"(%x, %w, %cos, %sin, %cache, %pos)
// FUSE:           tta.matmul
// FUSE:           %[[HI:.+]] = tta.slice %{{.+}} start = [0, 4, 0] step = [1, 1, 1] : tensor<2x8x32xbf16> -> tensor<2x8x32xbf16>
// FUSE:           tta.matmul %{{.+}}, %{{.+}} : tensor<2x1x1x32xbf16>, tensor<2x32x8xbf16>
// FUSE:           %[[LO:.+]] = tta.slice %{{.+}} start = [0, -4, 0] step = [1, 1, 1] : tensor<2x8x32xbf16> -> tensor<2x8x32xbf16>
// FUSE:           tta.matmul %{{.+}}, %{{.+}} : tensor<2x1x1x32xbf16>, tensor<2x32x8xbf16>
// FUSE:           %rot = tta.where
// FUSE:           %new_1 = tta.put %cache_1[%pos_1 : tensor<1xi32>] = %row
// FUSE-NEXT:      tta.yield %new_1
// FUSE-NEXT:    }
// FUSE-NEXT:    func.return %new

// KERNEL-LABEL: builtin.module @key_row_0_matmul_epilogue
// KERNEL-COUNT-3: tt.dot
// KERNEL:         tt.store %{{.+}} : tensor<16x{{[0-9]+}}x!tt.ptr<bf16>>, tensor<16x{{[0-9]+}}xbf16>, tensor<16x{{[0-9]+}}xi1>
// KERNEL-NEXT:    func.return

// The same with heads of 32 columns (`w` 64 x 32, two heads): the default tile is 32 columns wide, one head,
// so it holds both columns of each rotated pair (`rotations.py`); the halves are then the product's own tile
// with its halves swapped, one `tt.gather`, not two more dots reading `w` again.

func.func @query_row(%x: tensor<2x1x32xf32>, %w: tensor<64x32xbf16>, %cos: tensor<1x32xf32>, %sin: tensor<1x32xf32>) -> tensor<2x2x1x32xf32> {
  %xb = tta.cast %x : tensor<2x1x32xf32> -> tensor<2x1x32xbf16>
  %wt = tta.transpose %w permutation = [1, 0] : tensor<64x32xbf16> -> tensor<32x64xbf16>
  %p = tta.matmul %xb, %wt : tensor<2x1x32xbf16>, tensor<32x64xbf16> -> tensor<2x1x64xbf16>
  %pf = tta.cast %p : tensor<2x1x64xbf16> -> tensor<2x1x64xf32>
  %split = tta.reshape %pf : tensor<2x1x64xf32> -> tensor<2x1x2x32xf32>
  %q = tta.transpose %split permutation = [0, 2, 1, 3] : tensor<2x1x2x32xf32> -> tensor<2x2x1x32xf32>
  %hi = tta.slice %q start = [0, 0, 0, 16] step = [1, 1, 1, 1] : tensor<2x2x1x32xf32> -> tensor<2x2x1x16xf32>
  %neg = tta.neg %hi : tensor<2x2x1x16xf32>
  %lo = tta.slice %q start = [0, 0, 0, 0] step = [1, 1, 1, 1] : tensor<2x2x1x32xf32> -> tensor<2x2x1x16xf32>
  %rot = tta.concatenate %neg, %lo axis = 3 : tensor<2x2x1x16xf32>, tensor<2x2x1x16xf32> -> tensor<2x2x1x32xf32>
  %qc = tta.mul %q, %cos : tensor<2x2x1x32xf32>, tensor<1x32xf32> -> tensor<2x2x1x32xf32>
  %rs = tta.mul %rot, %sin : tensor<2x2x1x32xf32>, tensor<1x32xf32> -> tensor<2x2x1x32xf32>
  %rope = tta.add %qc, %rs : tensor<2x2x1x32xf32>, tensor<2x2x1x32xf32> -> tensor<2x2x1x32xf32>
  func.return %rope : tensor<2x2x1x32xf32>
}

// CHECK-LABEL: func.func @query_row
// FUSE-LABEL: func.func @query_row
// FUSE-COUNT-3:   tta.matmul

// KERNEL-LABEL: builtin.module @query_row_1_matmul_epilogue
// KERNEL:         tt.dot %{{.+}} : tensor<16x32xbf16>, tensor<32x32xbf16> -> tensor<16x32xf32>
// KERNEL-NOT:     tt.dot
// KERNEL:         tt.gather %{{.+}} axis = 1 : tensor<16x32xbf16>, tensor<16x32xi32> -> tensor<16x32xbf16>
// KERNEL-NOT:     tt.dot
// KERNEL-NOT:     tt.gather
// KERNEL:         tt.store
