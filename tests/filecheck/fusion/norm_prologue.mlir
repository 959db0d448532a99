// RUN: tinyton-opt %s -p tinyton-fuse | filecheck %s
// RUN: tinyton-opt %s -p tinyton-fuse,tinyton-fusion-to-kernels | filecheck %s --check-prefix=KERNEL

// RMSNorm rounded to bf16 before the projections (a model whose weights are bf16): the rounding comes after
// the scale, so the scale cannot move behind the matmul (tinyton-row-scale); the normed operand is the
// matmul's prologue instead (tinyton/analysis/matmul_operands.py), evaluated per K tile exactly as written
// after a loop over K computes `mean(x * x)`. q (48 wide) and k/v (32 wide) are two kernels: each gets its
// own copy of the norm (tinyton/rewrites/prologues.py), k and v share theirs.

func.func @norm_qkv(%x: tensor<2x64xf32>, %g: tensor<64xbf16>, %wq: tensor<48x64xbf16>, %wk: tensor<32x64xbf16>, %wv: tensor<32x64xbf16>) -> (tensor<2x48xbf16>, tensor<2x32xbf16>, tensor<2x32xbf16>) {
  %sq = tta.mul %x, %x : tensor<2x64xf32>, tensor<2x64xf32> -> tensor<2x64xf32>
  %ms = tta.reduce_mean %sq axis = 1 keepdims : tensor<2x64xf32> -> tensor<2x1xf32>
  %eps = tta.constant 9.99999974E-6 : f32 -> f32
  %a = tta.add %ms, %eps : tensor<2x1xf32>, f32 -> tensor<2x1xf32>
  %r = tta.rsqrt %a : tensor<2x1xf32>
  %n = tta.mul %x, %r : tensor<2x64xf32>, tensor<2x1xf32> -> tensor<2x64xf32>
  %gf = tta.cast %g : tensor<64xbf16> -> tensor<64xf32>
  %h = tta.mul %n, %gf : tensor<2x64xf32>, tensor<64xf32> -> tensor<2x64xf32>
  %hb = tta.cast %h : tensor<2x64xf32> -> tensor<2x64xbf16>
  %wqt = tta.transpose %wq permutation = [1, 0] : tensor<48x64xbf16> -> tensor<64x48xbf16>
  %q = tta.matmul %hb, %wqt : tensor<2x64xbf16>, tensor<64x48xbf16> -> tensor<2x48xbf16>
  %wkt = tta.transpose %wk permutation = [1, 0] : tensor<32x64xbf16> -> tensor<64x32xbf16>
  %k = tta.matmul %hb, %wkt : tensor<2x64xbf16>, tensor<64x32xbf16> -> tensor<2x32xbf16>
  %wvt = tta.transpose %wv permutation = [1, 0] : tensor<32x64xbf16> -> tensor<64x32xbf16>
  %v = tta.matmul %hb, %wvt : tensor<2x64xbf16>, tensor<64x32xbf16> -> tensor<2x32xbf16>
  func.return %q, %k, %v : tensor<2x48xbf16>, tensor<2x32xbf16>, tensor<2x32xbf16>
}

// CHECK-LABEL: func.func @norm_qkv
// CHECK-NEXT:    %k, %v = tta.fusion "matmul_epilogue"(%x, %g, %wk, %wv)
// CHECK:           %ms = tta.reduce_mean
// CHECK:           %hb = tta.cast %h
// CHECK:           %k_1 = tta.matmul %hb, %wkt
// CHECK:           %v_1 = tta.matmul %hb, %wvt
// CHECK:         %q = tta.fusion "matmul_epilogue"(%x, %g, %wq)
// CHECK:           %ms = tta.reduce_mean
// CHECK:           %hb = tta.cast %h
// CHECK:           %q_1 = tta.matmul %hb, %wqt
// CHECK-NOT:     tta.fusion
// CHECK:         func.return %q, %k, %v

// The statistics loop, then the product's loop computing the bf16 tile of the operand from tiles of x and g; the
// statistics loop loads its tiles up to four K steps ahead (here K's two), the product's loop one step ahead, the
// first ones before the loop, and both carry them in registers:
// KERNEL-LABEL: builtin.module @norm_qkv_1_matmul_epilogue
// KERNEL:         %[[S0:.+]] = tt.load
// KERNEL:         %[[S1:.+]] = tt.load
// KERNEL:         %[[SS:.+]], %{{.+}}, %{{.+}} = scf.for {{.+}} iter_args(%{{.+}} = %{{.+}}, %[[X:.+]] = %[[S0]], %[[Y:.+]] = %[[S1]])
// KERNEL:           %[[SN:.+]] = tt.load
// KERNEL:           tt.mul %[[X]], %[[X]] : tensor<16x32xf32>
// KERNEL:           scf.yield %{{.+}}, %[[Y]], %[[SN]]
// KERNEL:         tt.reduce_sum %[[SS]] axis = 1
// KERNEL:         %[[R:.+]] = tt.rsqrt %{{.+}} : tensor<16x1xf32>
// KERNEL:         %[[X0:.+]] = tt.load {{.+}} : tensor<16x32x!tt.ptr<f32>>, tensor<16x32xi1>, tensor<16x32xf32> -> tensor<16x32xf32>
// KERNEL:         %[[G0:.+]] = tt.load {{.+}} : tensor<1x32x!tt.ptr<bf16>> -> tensor<1x32xbf16>
// KERNEL:         scf.for {{.+}} iter_args(%{{.+}} = %{{.+}}, %[[XT:.+]] = %[[X0]], %[[G:.+]] = %[[G0]])
// KERNEL:           %[[XN:.+]] = tt.load {{.+}} : tensor<16x32x!tt.ptr<f32>>, tensor<16x32xi1>, tensor<16x32xf32> -> tensor<16x32xf32>
// KERNEL:           %[[GN:.+]] = tt.load {{.+}} : tensor<1x32x!tt.ptr<bf16>>, tensor<1x32xi1>, tensor<1x32xbf16> -> tensor<1x32xbf16>
// KERNEL:           %[[RB:.+]] = tt.broadcast %[[R]]
// KERNEL:           %[[N:.+]] = tt.mul %[[XT]], %[[RB]]
// KERNEL:           %[[GF:.+]] = tt.cast %[[G]]
// KERNEL:           %[[GB:.+]] = tt.broadcast %[[GF]]
// KERNEL:           %[[H:.+]] = tt.mul %[[N]], %[[GB]]
// KERNEL:           %[[A:.+]] = tt.cast %[[H]] : tensor<16x32xf32> -> tensor<16x32xbf16>
// KERNEL:           tt.dot %[[A]], %{{.+}}, %{{.+}} : tensor<16x32xbf16>, tensor<32x64xbf16> -> tensor<16x64xf32>
// KERNEL:           scf.yield %{{.+}}, %[[XN]], %[[GN]]

// One row (a batch-1 decode step) in the product's 16-row tile: the statistics loop reads the row alone, `[1, K]`,
// in one step (as `[16, BK]` tiles of the product's K step it was K / BK dependent loads before the first product):
func.func @norm_one_row(%x: tensor<1x2048xf32>, %g: tensor<2048xbf16>, %wq: tensor<256x2048xbf16>) -> tensor<1x256xbf16> {
  %sq = tta.mul %x, %x : tensor<1x2048xf32>, tensor<1x2048xf32> -> tensor<1x2048xf32>
  %ms = tta.reduce_mean %sq axis = 1 keepdims : tensor<1x2048xf32> -> tensor<1x1xf32>
  %eps = tta.constant 9.99999974E-6 : f32 -> f32
  %a = tta.add %ms, %eps : tensor<1x1xf32>, f32 -> tensor<1x1xf32>
  %r = tta.rsqrt %a : tensor<1x1xf32>
  %n = tta.mul %x, %r : tensor<1x2048xf32>, tensor<1x1xf32> -> tensor<1x2048xf32>
  %gf = tta.cast %g : tensor<2048xbf16> -> tensor<2048xf32>
  %h = tta.mul %n, %gf : tensor<1x2048xf32>, tensor<2048xf32> -> tensor<1x2048xf32>
  %hb = tta.cast %h : tensor<1x2048xf32> -> tensor<1x2048xbf16>
  %wqt = tta.transpose %wq permutation = [1, 0] : tensor<256x2048xbf16> -> tensor<2048x256xbf16>
  %q = tta.matmul %hb, %wqt : tensor<1x2048xbf16>, tensor<2048x256xbf16> -> tensor<1x256xbf16>
  func.return %q : tensor<1x256xbf16>
}

// KERNEL-LABEL: builtin.module @norm_one_row_{{[0-9]+}}_matmul_epilogue
// KERNEL:         %[[S0:.+]] = tt.load {{.+}} : tensor<1x2048x!tt.ptr<f32>> -> tensor<1x2048xf32>
// KERNEL:         %[[SS:.+]], %{{.+}} = scf.for %[[K:.+]] = %{{.+}} to %[[END:.+]] step %[[END]] iter_args(%{{.+}} = %{{.+}}, %[[X:.+]] = %[[S0]])
// KERNEL:           tt.mul %[[X]], %[[X]] : tensor<1x2048xf32>
// KERNEL:         tt.reduce_sum %[[SS]] axis = 1 : tensor<1x2048xf32>
// KERNEL:         tt.rsqrt %{{.+}} : tensor<1x1xf32>
// KERNEL:         scf.for
// KERNEL:           tt.dot {{.+}} : tensor<16x32xbf16>, tensor<32x64xbf16> -> tensor<16x64xf32>
