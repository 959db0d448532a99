// RUN: tinyton-opt %s -p tinyton-fuse | filecheck %s
// RUN: tinyton-opt %s -p tinyton-fuse,tinyton-fusion-to-kernels | filecheck %s --check-prefix=KERNEL

// A linear layer's weight and bias gradients, `dy.T @ x` and `dy.sum(0)`: the sum over dy's rows is a sum over the
// product's K of its left operand dy.T (row_stats.operand_sum_groups proposes the group, matmul_operands.permuted_map
// maps dy onto the K loop), so one kernel computes both, the sum from the tiles of dy.T the dot reads anyway.

func.func @linear_grads(%dy: tensor<40x48xf32>, %x: tensor<40x96xf32>) -> (tensor<48x96xf32>, tensor<1x48xf32>) {
  %t = tta.transpose %dy permutation = [1, 0] : tensor<40x48xf32> -> tensor<48x40xf32>
  %dw = tta.matmul %t, %x : tensor<48x40xf32>, tensor<40x96xf32> -> tensor<48x96xf32>
  %db = tta.reduce_sum %dy axis = 0 keepdims : tensor<40x48xf32> -> tensor<1x48xf32>
  func.return %dw, %db : tensor<48x96xf32>, tensor<1x48xf32>
}

// CHECK-LABEL: func.func @linear_grads
// CHECK-NEXT:    %dw, %db = tta.fusion "matmul_epilogue"(%dy, %x)
// CHECK:           %t = tta.transpose %dy_1
// CHECK-NEXT:      %dw_1 = tta.matmul %t, %x_1
// CHECK-NEXT:      %db_1 = tta.reduce_sum %dy_1 axis = 0 keepdims
// CHECK-NEXT:      tta.yield %dw_1, %db_1
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %dw, %db

// The sum accumulates beside the dot from the loaded tile of dy.T (lanes past K or M neutral), is reduced over the
// tile's K lanes after the loop, and only the programs of the first column tile store it: each column tile's
// programs sum the same rows.

// KERNEL-LABEL: builtin.module @linear_grads_0_matmul_epilogue
// KERNEL:         %[[COLS:.+]] = tt.mul %{{.+}}, %{{.+}} : i32
// KERNEL:         %[[DOT:.+]], %[[SUMS:.+]] = scf.for %{{.+}} iter_args(%[[ACC:[0-9]+]] = %{{[0-9]+}}, %[[PART:[0-9]+]] = %{{[0-9]+}})
// KERNEL-SAME:      -> (tensor<64x64xf32>, tensor<64x32xf32>)
// KERNEL:           %[[A:.+]] = tt.load %{{.+}} mask %[[M:.+]] other
// KERNEL:           %[[D:.+]] = tt.dot %[[A]], %{{.+}}, %[[ACC]]
// KERNEL:           %[[SEL:.+]] = tt.select %[[M]], %[[A]]
// KERNEL-NEXT:      %[[NEXT:.+]] = tt.add %[[PART]], %[[SEL]]
// KERNEL-NEXT:      scf.yield %[[D]], %[[NEXT]]
// KERNEL:         %[[ROW:.+]] = tt.reduce_sum %[[SUMS]] axis = 1 : tensor<64x32xf32> -> tensor<64xf32>
// KERNEL-NEXT:    %[[DB:.+]] = tt.expand_dims %[[ROW]] axis = 1
// KERNEL:         tt.store %{{.+}}, %[[DOT]] mask
// KERNEL:         %[[FIRST:.+]] = tt.cmp "eq", %[[COLS]], %{{.+}} : i32 -> i1
// KERNEL-NEXT:    %[[SPLAT:.+]] = tt.splat %[[FIRST]] : i1 -> tensor<64x1xi1>
// KERNEL-NEXT:    %[[STORED:.+]] = tt.and %{{.+}}, %[[SPLAT]]
// KERNEL-NEXT:    tt.store %{{.+}}, %[[DB]] mask %[[STORED]] : tensor<64x1x!tt.ptr<f32>>

// Over the rows of a `[B, T, C]` gradient (reshaped for the product) in bf16: summed in f32, rounded once (torch's
// sum), in the same kernel; the reshaped result is the sum's buffer (an alias, no launch).

func.func @linear_grads_3d(%dy3: tensor<2x20x48xbf16>, %x: tensor<40x96xbf16>)
    -> (tensor<48x96xbf16>, tensor<48xbf16>) {
  %dy = tta.reshape %dy3 : tensor<2x20x48xbf16> -> tensor<40x48xbf16>
  %t = tta.transpose %dy permutation = [1, 0] : tensor<40x48xbf16> -> tensor<48x40xbf16>
  %dw = tta.matmul %t, %x : tensor<48x40xbf16>, tensor<40x96xbf16> -> tensor<48x96xbf16>
  %s = tta.reduce_sum %dy axis = 0 keepdims : tensor<40x48xbf16> -> tensor<1x48xbf16>
  %db = tta.reshape %s : tensor<1x48xbf16> -> tensor<48xbf16>
  func.return %dw, %db : tensor<48x96xbf16>, tensor<48xbf16>
}

// CHECK-LABEL: func.func @linear_grads_3d
// CHECK-NEXT:    %dw, %s = tta.fusion "matmul_epilogue"(%dy3, %x)
// CHECK:           %dy = tta.reshape %dy3_1
// CHECK-NEXT:      %t = tta.transpose %dy
// CHECK-NEXT:      %dw_1 = tta.matmul %t, %x_1
// CHECK-NEXT:      %s_1 = tta.reduce_sum %dy axis = 0 keepdims
// CHECK:         %db = tta.fusion "reshape"(%s)

// KERNEL-LABEL: builtin.module @linear_grads_3d_1_matmul_epilogue
// KERNEL:         scf.for
// KERNEL:           %[[A3:.+]] = tt.load %{{.+}} mask %[[M3:.+]] other %{{.+}} : {{.+}} -> tensor<64x32xbf16>
// KERNEL:           %[[WIDE:.+]] = tt.cast %[[A3]] : tensor<64x32xbf16> -> tensor<64x32xf32>
// KERNEL:           tt.select %[[M3]], %[[WIDE]]
// KERNEL:         %[[ROW3:.+]] = tt.reduce_sum %{{.+}} axis = 1 : tensor<64x32xf32> -> tensor<64xf32>
// KERNEL-NEXT:    %[[DB3:.+]] = tt.expand_dims %[[ROW3]] axis = 1
// KERNEL-NEXT:    tt.cast %[[DB3]] : tensor<64x1xf32> -> tensor<64x1xbf16>
