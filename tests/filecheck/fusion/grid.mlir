// RUN: tinyton-opt %s -p tinyton-fuse,tinyton-fusion-to-kernels | filecheck %s

// Few long rows in one kernel (16 x 262144 on a GPU of 132 SMs): each program takes the same slice of 4096 of
// two rows (64 slices per row, 512 programs: 4 per SM, `tt.min_programs_per_sm`, 32 elements per thread of 8
// warps). It loads both slices first, then takes the rows in turn: stores the row's (max, sum) partials (blocks
// of 1024), waits at a grid barrier for the 64 programs of the row (the row's counter, 32 elements apart; slice
// 0 leads), combines the 64 partials of the row and writes its slice of the output from the tile it loaded.
// One read, one write.

func.func @softmax(%x: tensor<16x262144xf32>) -> tensor<16x262144xf32> {
  %m = tta.reduce_max %x axis = 1 keepdims : tensor<16x262144xf32> -> tensor<16x1xf32>
  %s = tta.sub %x, %m : tensor<16x262144xf32>, tensor<16x1xf32> -> tensor<16x262144xf32>
  %e = tta.exp %s : tensor<16x262144xf32>
  %d = tta.reduce_sum %e axis = 1 keepdims : tensor<16x262144xf32> -> tensor<16x1xf32>
  %r = tta.div %e, %d : tensor<16x262144xf32>, tensor<16x1xf32> -> tensor<16x262144xf32>
  func.return %r : tensor<16x262144xf32>
}

// CHECK:       tta.fusion "softmax"(%x) {kernel = "softmax_0_softmax"}
// CHECK-LABEL: builtin.module @softmax_0_softmax attributes {tt.num_warps = 8 : i32, tt.min_programs_per_sm = 4 : i32, tinyton.grid = array<i64: 512, 1, 1>}
// CHECK-NEXT:    func.func @softmax_0_softmax(%x: !tt.ptr<f32> {{.*}}, %out0: !tt.ptr<f32> {{.*}}, %partial0: !tt.ptr<f32> {{.*}}, %counter: !tt.ptr<i32> {{.*}})
// CHECK:           %[[PID:.+]] = tt.program_id 0
// CHECK:           %[[SLICE:.+]] = tt.mod %[[PID]], %[[N:.+]] : i32
// CHECK:           %[[PAIR:.+]] = tt.floordiv %[[PID]], %[[N]] : i32
// CHECK:           %[[ROW0:.+]] = tt.mul %[[PAIR]], %{{.+}} : i32
// CHECK:           %[[ROW1:.+]] = tt.add %[[ROW0]], %{{.+}} : i32
// CHECK:           %[[PX0:.+]] = tt.addptr %{{.+}}, %[[OFFS0:.+]] : tensor<4096x!tt.ptr<f32>>, tensor<4096xi32>
// CHECK-NEXT:      %[[X0:.+]] = tt.load %[[PX0]] : tensor<4096x!tt.ptr<f32>> -> tensor<4096xf32>
// CHECK:           %[[PX1:.+]] = tt.addptr %{{.+}}, %[[OFFS1:.+]] : tensor<4096x!tt.ptr<f32>>, tensor<4096xi32>
// CHECK-NEXT:      %[[X1:.+]] = tt.load %[[PX1]] : tensor<4096x!tt.ptr<f32>> -> tensor<4096xf32>
// CHECK-NOT:       scf.for
// CHECK:           %[[M:.+]] = tt.maximum
// CHECK:           tt.exp
// CHECK:           %[[S:.+]] = tt.add %{{.+}} : f32
// CHECK:           tt.mul %[[ROW0]]
// CHECK:           tt.store %{{.+}}, %[[M]] : !tt.ptr<f32>, f32
// CHECK:           tt.constant 1024
// CHECK:           tt.store %{{.+}}, %[[S]] : !tt.ptr<f32>, f32
// CHECK:           %[[C:.+]] = tt.addptr %counter, %{{.+}} : !tt.ptr<i32>, i32
// CHECK-NEXT:      %[[Z:.+]] = tt.constant 0 : i32
// CHECK-NEXT:      %[[L:.+]] = tt.cmp "eq", %[[SLICE]], %[[Z]] : i32 -> i1
// CHECK-NEXT:      tt.grid_barrier %[[C]], %[[L]] programs 64 : !tt.ptr<i32>
// CHECK:           %[[MS:.+]] = tt.load %{{.+}} : tensor<64x!tt.ptr<f32>> -> tensor<64xf32>
// CHECK:           %[[SS:.+]] = tt.load %{{.+}} : tensor<64x!tt.ptr<f32>> -> tensor<64xf32>
// CHECK:           %[[MAX:.+]] = tt.reduce_max %[[MS]] axis = 0 : tensor<64xf32> -> f32
// CHECK:           tt.mul %[[SS]]
// CHECK:           tt.reduce_sum
// CHECK:           %[[B:.+]] = tt.splat %[[MAX]] : f32 -> tensor<4096xf32>
// CHECK:           tt.sub %[[X0]], %[[B]] : tensor<4096xf32>
// CHECK:           tt.exp
// CHECK:           tt.div
// CHECK:           %[[OUT0:.+]] = tt.addptr %{{.+}}, %[[OFFS0]]
// CHECK-NOT:       tt.load %{{.+}} : tensor<4096x
// CHECK:           tt.store %[[OUT0]], %{{.+}} : tensor<4096x!tt.ptr<f32>>, tensor<4096xf32>
// CHECK:           tt.sub %[[X1]], %{{.+}} : tensor<4096xf32>
// CHECK:           tt.mul %[[ROW1]]
// CHECK:           tt.grid_barrier %{{.+}} programs 64 : !tt.ptr<i32>
// CHECK:           %[[OUT1:.+]] = tt.addptr %{{.+}}, %[[OFFS1]]
// CHECK-NOT:       tt.load %{{.+}} : tensor<4096x
// CHECK:           tt.store %[[OUT1]], %{{.+}} : tensor<4096x!tt.ptr<f32>>, tensor<4096xf32>
// CHECK-NEXT:      func.return

// Layer norm over 4 rows of 100000: 49 slices of 2048 (the last one masked) of two rows per program (98
// programs), count/mean/M2 partials, one barrier per row; a mean, then the sum of what it scaled (not a pair):
// two barriers per row, the second level's partials computed from the same registers.

func.func @layernorm(%x: tensor<4x100000xf32>) -> tensor<4x100000xf32> {
  %mu = tta.reduce_mean %x axis = 1 keepdims : tensor<4x100000xf32> -> tensor<4x1xf32>
  %d = tta.sub %x, %mu : tensor<4x100000xf32>, tensor<4x1xf32> -> tensor<4x100000xf32>
  %d2 = tta.mul %d, %d : tensor<4x100000xf32>, tensor<4x100000xf32> -> tensor<4x100000xf32>
  %var = tta.reduce_mean %d2 axis = 1 keepdims : tensor<4x100000xf32> -> tensor<4x1xf32>
  %r = tta.rsqrt %var : tensor<4x1xf32>
  %n = tta.mul %d, %r : tensor<4x100000xf32>, tensor<4x1xf32> -> tensor<4x100000xf32>
  func.return %n : tensor<4x100000xf32>
}

// CHECK-LABEL: builtin.module @layernorm_1_row_reduction attributes {tt.num_warps = 8 : i32, tt.min_programs_per_sm = 4 : i32, tinyton.grid = array<i64: 98, 1, 1>}
// CHECK-COUNT-2:   tt.load %{{.+}} mask %{{.+}} : tensor<2048x!tt.ptr<f32>>, tensor<2048xi1> -> tensor<2048xf32>
// CHECK-COUNT-3:   tt.store %{{.+}} : !tt.ptr<f32>, f32
// CHECK:           tt.grid_barrier %{{.+}} programs 49
// CHECK-NOT:       tt.grid_barrier
// CHECK:           tt.rsqrt
// CHECK:           tt.store %{{.+}} mask
// CHECK-COUNT-3:   tt.store %{{.+}} : !tt.ptr<f32>, f32
// CHECK:           tt.grid_barrier %{{.+}} programs 49
// CHECK-NOT:       tt.grid_barrier
// CHECK:           tt.rsqrt
// CHECK:           tt.store %{{.+}} mask

func.func @scaled_sum(%x: tensor<2x9001xf32>) -> tensor<2xf32> {
  %m = tta.reduce_max %x axis = 1 keepdims : tensor<2x9001xf32> -> tensor<2x1xf32>
  %q = tta.div %x, %m : tensor<2x9001xf32>, tensor<2x1xf32> -> tensor<2x9001xf32>
  %s = tta.reduce_sum %q axis = 1 : tensor<2x9001xf32> -> tensor<2xf32>
  func.return %s : tensor<2xf32>
}

// CHECK-LABEL: builtin.module @scaled_sum_2_row_reduction
// CHECK:           %[[X2:.+]] = tt.load %{{.+}} mask
// CHECK:           tt.load %{{.+}} mask
// CHECK:           tt.reduce_max
// CHECK:           tt.grid_barrier
// CHECK:           %[[R2:.+]] = tt.div %{{.+}} : f32
// CHECK:           tt.mul %[[X2]], %{{.+}} : tensor<2048xf32>
// CHECK:           tt.reduce_sum
// CHECK:           tt.grid_barrier
// CHECK-NOT:       tt.load %{{.+}} : tensor<2048x
// CHECK:           tt.store
