// RUN: tinyton-opt %s -p 'tinyton-fuse,tinyton-fusion-to-kernels{sm_count=8}' | filecheck %s

// Split rows in two kernels: the form taken when the GPU cannot hold the region in the registers of its
// programs (here a GPU of 8 SMs; on 132 SMs these regions take one kernel with grid barriers, grid.mlir).
// Few long rows (16 x 262144): each row is cut into 64 slices of 4096, one program
// per (row, slice), 1024 in all. Kernel 0 runs the online max+sum over its slice and stores the slice's
// (max, sum) in a scratch buffer (a block of 1024 values each: maxima at 0, sums at 1024); kernel 1 combines the 64 partials of its row (the sums rescaled by
// exp(m - max)) and writes its slice of the output, walking the programs from the last one (program
// 1023 - pid: the slices kernel 0 read last are the likeliest in L2).

func.func @softmax(%x: tensor<16x262144xf32>) -> tensor<16x262144xf32> {
  %m = tta.reduce_max %x axis = 1 keepdims : tensor<16x262144xf32> -> tensor<16x1xf32>
  %s = tta.sub %x, %m : tensor<16x262144xf32>, tensor<16x1xf32> -> tensor<16x262144xf32>
  %e = tta.exp %s : tensor<16x262144xf32>
  %d = tta.reduce_sum %e axis = 1 keepdims : tensor<16x262144xf32> -> tensor<16x1xf32>
  %r = tta.div %e, %d : tensor<16x262144xf32>, tensor<16x1xf32> -> tensor<16x262144xf32>
  func.return %r : tensor<16x262144xf32>
}

// CHECK:       tta.fusion "softmax"(%x) {kernel = "softmax_0_softmax_0 softmax_0_softmax_1"}
// CHECK:       {kernel = "layernorm_2_row_reduction_0 layernorm_2_row_reduction_1"}
// CHECK-LABEL: builtin.module @softmax_0_softmax_0 attributes {tt.num_warps = 8 : i32, tinyton.grid = array<i64: 1024, 1, 1>}
// CHECK-NEXT:    func.func @softmax_0_softmax_0(%x: !tt.ptr<f32> {{.*}}, %out0: !tt.ptr<f32> {{.*}}, %partial0: !tt.ptr<f32> {{.*}})
// CHECK:           %[[PID:.+]] = tt.program_id 0
// CHECK:           %[[SLICE:.+]] = tt.mod %[[PID]], %[[N:.+]] : i32
// CHECK:           %[[ROW:.+]] = tt.floordiv %[[PID]], %[[N]] : i32
// CHECK:           %[[START:.+]] = tt.mul %[[SLICE]], %{{.+}} : i32
// CHECK:           %[[M:.+]], %[[S:.+]] = scf.for
// CHECK:             tt.add %[[START]]
// CHECK:             tt.load %{{.+}} : tensor<4096x!tt.ptr<f32>> -> tensor<4096xf32>
// CHECK:             tt.reduce_max
// CHECK:             tt.exp
// CHECK:             tt.reduce_sum
// CHECK:             scf.yield
// CHECK:           %[[ROWS:.+]] = tt.addptr %partial0, %{{.+}}
// CHECK:           %[[AT:.+]] = tt.addptr %[[ROWS]], %[[SLICE]]
// CHECK:           tt.store %[[AT]], %[[M]] : !tt.ptr<f32>, f32
// CHECK:           tt.constant 1024
// CHECK:           tt.addptr %partial0
// CHECK:           tt.store %{{.+}}, %[[S]] : !tt.ptr<f32>, f32
// CHECK-NEXT:      func.return

// CHECK-LABEL: builtin.module @softmax_0_softmax_1 attributes {tt.num_warps = 8 : i32, tinyton.grid = array<i64: 1024, 1, 1>}
// CHECK:           %[[PID1:.+]] = tt.program_id 0
// CHECK:           %[[REV:.+]] = tt.sub %{{.+}}, %[[PID1]] : i32
// CHECK:           tt.mod %[[REV]]
// CHECK:           %[[LANES:.+]] = tt.arange 0 to 64 : tensor<64xi32>
// CHECK:           %[[MS:.+]] = tt.load %{{.+}} : tensor<64x!tt.ptr<f32>> -> tensor<64xf32>
// CHECK:           %[[SS:.+]] = tt.load %{{.+}} : tensor<64x!tt.ptr<f32>> -> tensor<64xf32>
// CHECK:           %[[MAX:.+]] = tt.reduce_max %[[MS]] axis = 0 : tensor<64xf32> -> f32
// CHECK:           tt.sub %[[MS]]
// CHECK:           %[[SCALE:.+]] = tt.exp
// CHECK:           %[[SCALED:.+]] = tt.mul %[[SS]], %[[SCALE]] : tensor<64xf32>
// CHECK:           %[[SUM:.+]] = tt.reduce_sum %[[SCALED]] axis = 0 : tensor<64xf32> -> f32
// The division by the row's sum is one reciprocal per row and a multiplication (refined by an fma) per element.
// CHECK:           %[[RCP:.+]] = tt.div %{{.+}}, %{{.+}} : f32
// CHECK:           scf.for
// CHECK:             tt.load %{{.+}} : tensor<4096x!tt.ptr<f32>> -> tensor<4096xf32>
// CHECK:             tt.exp
// CHECK-NOT:         tt.div
// CHECK:             tt.fma
// CHECK:             tt.store %{{.+}} : tensor<4096x!tt.ptr<f32>>, tensor<4096xf32>
// CHECK-NOT:     tt.store

// Layer norm: the mean and the variance around it in one walk (per slice: count, mean and M2, three
// blocks of one scratch buffer, merged across slices with Chan's formula), then the output: two kernels.

func.func @layernorm(%x: tensor<4x100000xf32>) -> tensor<4x100000xf32> {
  %mu = tta.reduce_mean %x axis = 1 keepdims : tensor<4x100000xf32> -> tensor<4x1xf32>
  %d = tta.sub %x, %mu : tensor<4x100000xf32>, tensor<4x1xf32> -> tensor<4x100000xf32>
  %d2 = tta.mul %d, %d : tensor<4x100000xf32>, tensor<4x100000xf32> -> tensor<4x100000xf32>
  %var = tta.reduce_mean %d2 axis = 1 keepdims : tensor<4x100000xf32> -> tensor<4x1xf32>
  %r = tta.rsqrt %var : tensor<4x1xf32>
  %n = tta.mul %d, %r : tensor<4x100000xf32>, tensor<4x1xf32> -> tensor<4x100000xf32>
  func.return %n : tensor<4x100000xf32>
}

// 49 slices of 2048 per row (the last one masked), 196 programs; the partials' tile is masked too.

// CHECK-LABEL: builtin.module @layernorm_2_row_reduction_0 attributes {tt.num_warps = 8 : i32, tinyton.grid = array<i64: 196, 1, 1>}
// CHECK:           %[[N:.+]], %[[MEAN:.+]], %[[M2:.+]] = scf.for {{.+}} -> (f32, f32, f32) : i32 {
// CHECK:             tt.load %{{.+}} mask
// CHECK:             %[[COUNT:.+]] = tt.reduce_sum
// CHECK:             tt.div
// CHECK:             tt.sub
// CHECK:             tt.mul
// CHECK:             tt.reduce_sum
// CHECK:             scf.yield
// CHECK:           tt.store %{{.+}}, %[[N]] : !tt.ptr<f32>, f32
// CHECK:           tt.store %{{.+}}, %[[MEAN]] : !tt.ptr<f32>, f32
// CHECK:           tt.store %{{.+}}, %[[M2]] : !tt.ptr<f32>, f32
// CHECK-LABEL: builtin.module @layernorm_2_row_reduction_1
// CHECK:           %[[NS:.+]] = tt.select %{{.+}} : tensor<64xi1>, tensor<64xf32>
// CHECK:           %[[MS:.+]] = tt.select %{{.+}} : tensor<64xi1>, tensor<64xf32>
// CHECK:           %[[M2S:.+]] = tt.select %{{.+}} : tensor<64xi1>, tensor<64xf32>
// CHECK:           %[[TOTAL:.+]] = tt.reduce_sum %[[NS]] axis = 0
// CHECK:           tt.mul %[[NS]], %[[MS]] : tensor<64xf32>
// CHECK:           tt.div %{{.+}}, %[[TOTAL]] : f32
// CHECK:           tt.reduce_sum %[[M2S]] axis = 0
// CHECK:           tt.rsqrt
// CHECK:           scf.for
// CHECK:             tt.store %{{.+}} mask
