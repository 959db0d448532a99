// RUN: tinyton-opt %s -p tinyton-fuse,tinyton-fusion-to-kernels | filecheck %s

// `x @ w.T` over a batch (the linear layer of a model): both operands are read as blocks of the matrices as
// stored, so TMA can copy them on sm_90. w is the same for every batch element, so the batch is folded into
// the rows (one 256 x 64 @ 64 x 128 product, w read once, not once per batch element): x (4 x 64 x 64) is a
// 2-D descriptor of its 256 rows; w (128 x 64, read transposed) is a 2-D descriptor of w as stored, whose
// [BN, BK] blocks feed the dot through tt.trans (the K-major B operand).

func.func @linear(%x: tensor<4x64x64xf16>, %w: tensor<128x64xf16>) -> tensor<4x64x128xf16> {
  %wt = tta.transpose %w permutation = [1, 0] : tensor<128x64xf16> -> tensor<64x128xf16>
  %y = tta.matmul %x, %wt : tensor<4x64x64xf16>, tensor<64x128xf16> -> tensor<4x64x128xf16>
  func.return %y : tensor<4x64x128xf16>
}

// CHECK-LABEL: func.func @linear_0_matmul_epilogue
// CHECK:         scf.for
// CHECK:           %[[X:.+]] = "tt.descriptor_load"(%{{.+}}, %x, {{.+}}) <{padding = "zero", operandSegmentSizes = array<i32: 1, 0, 0, 1, 2, 2, 2>}> {{.*}} -> tensor<64x32xf16>
// CHECK:           %[[W:.+]] = "tt.descriptor_load"(%{{.+}}, %w, {{.+}}) <{padding = "zero", operandSegmentSizes = array<i32: 1, 0, 0, 1, 2, 2, 2>}> {{.*}} -> tensor<64x32xf16>
// CHECK-NEXT:      %[[WT:.+]] = tt.trans %[[W]] {order = array<i32: 1, 0>} : tensor<64x32xf16> -> tensor<32x64xf16>
// CHECK-NEXT:      tt.dot %[[X]], %[[WT]]
// CHECK-NOT:       tt.load

// A batch of weights too (`x @ w.mT`, w 4 x 128 x 64): no fold; x is a rank-3 descriptor whose outer index is
// the program's batch index, and so is w.

func.func @batched(%x: tensor<4x64x64xf16>, %w: tensor<4x128x64xf16>) -> tensor<4x64x128xf16> {
  %wt = tta.transpose %w permutation = [0, 2, 1] : tensor<4x128x64xf16> -> tensor<4x64x128xf16>
  %y = tta.matmul %x, %wt : tensor<4x64x64xf16>, tensor<4x64x128xf16> -> tensor<4x64x128xf16>
  func.return %y : tensor<4x64x128xf16>
}

// CHECK-LABEL: func.func @batched_1_matmul_epilogue
// CHECK:         scf.for
// CHECK:           %[[X:.+]] = "tt.descriptor_load"(%{{.+}}, %x, {{.+}}) <{padding = "zero", operandSegmentSizes = array<i32: 1, 0, 0, 1, 3, 3, 3>}> {{.*}} -> tensor<64x32xf16>
// CHECK:           %[[W:.+]] = "tt.descriptor_load"(%{{.+}}, %w, {{.+}}) <{padding = "zero", operandSegmentSizes = array<i32: 1, 0, 0, 1, 3, 3, 3>}> {{.*}} -> tensor<64x32xf16>
// CHECK-NEXT:      %[[WT:.+]] = tt.trans %[[W]] {order = array<i32: 1, 0>} : tensor<64x32xf16> -> tensor<32x64xf16>
// CHECK-NEXT:      tt.dot %[[X]], %[[WT]]
// CHECK-NOT:       tt.load
