// RUN: tinyton-opt %s -p tinyton-fuse | filecheck %s
// RUN: tinyton-opt %s -p tinyton-fuse,tinyton-fusion-to-kernels | filecheck %s --check-prefix=KERNEL

// Sampling (top-p style): softmax, its running sum along the row, a compare and a count are one kernel.
// A 40000-element row is walked twice: the online max and sum, then the chunks of the scan, each
// continuing the running total carried from the chunks before it. A chunk of 4096 is scanned as 64 runs of
// 64 (`tt.scan` holds its axis in each thread's registers), each run then adding the runs before it.

func.func @sample(%logits: tensor<4x40000xf32>, %u: tensor<4x1xf32>) -> tensor<4xi32> {
  %0 = tta.reduce_max %logits axis = 1 keepdims : tensor<4x40000xf32> -> tensor<4x1xf32>
  %1 = tta.sub %logits, %0 : tensor<4x40000xf32>, tensor<4x1xf32> -> tensor<4x40000xf32>
  %2 = tta.exp %1 : tensor<4x40000xf32>
  %3 = tta.reduce_sum %2 axis = 1 keepdims : tensor<4x40000xf32> -> tensor<4x1xf32>
  %4 = tta.div %2, %3 : tensor<4x40000xf32>, tensor<4x1xf32> -> tensor<4x40000xf32>
  %5 = tta.cumsum %4 axis = 1 : tensor<4x40000xf32> -> tensor<4x40000xf32>
  %6 = tta.cmp "lt", %5, %u : tensor<4x40000xf32>, tensor<4x1xf32> -> tensor<4x40000xi1>
  %7 = tta.cast %6 : tensor<4x40000xi1> -> tensor<4x40000xi32>
  %8 = tta.reduce_sum %7 axis = 1 : tensor<4x40000xi32> -> tensor<4xi32>
  func.return %8 : tensor<4xi32>
}

// CHECK-LABEL: func.func @sample
// CHECK-NEXT:    %0 = tta.fusion "softmax"(%logits, %u)
// CHECK:           tta.cumsum
// CHECK:           tta.reduce_sum %{{.*}} axis = 1 : tensor<4x40000xi32> -> tensor<4xi32>
// CHECK-NEXT:      tta.yield
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %0

// KERNEL-LABEL: builtin.module @sample_0_softmax
// KERNEL:         scf.for {{.*}} iter_args({{.*}}) -> (f32, f32)
// KERNEL:         scf.for {{.*}} iter_args(%[[COUNT:.*]] = %{{.*}}, %[[TOTAL:.*]] = %{{.*}}) -> (tensor<4096xi32>, f32)
// KERNEL:           %[[RUNS:.*]] = tt.reshape %[[P:.*]] : tensor<4096xf32> -> tensor<64x64xf32>
// KERNEL-NEXT:      %[[SCAN:.*]] = "tt.scan"(%[[RUNS]]) <{axis = 1 : i32, reverse = false}>
// KERNEL:             tt.add
// KERNEL:           tt.reduce_sum %[[RUNS]] axis = 1 : tensor<64x64xf32> -> tensor<64xf32>
// KERNEL:           %[[EARLIER:.*]] = tt.cmp "lt", %{{.*}}, %{{.*}} : tensor<64x64xi32>
// KERNEL:           tt.select %[[EARLIER]]
// KERNEL-NEXT:      %[[BEFORE:.*]] = tt.reduce_sum %{{.*}} axis = 1 : tensor<64x64xf32> -> tensor<64xf32>
// KERNEL:           %[[ROW:.*]] = tt.add %[[SCAN]], %{{.*}} : tensor<64x64xf32>
// KERNEL-NEXT:      %[[FLAT:.*]] = tt.reshape %[[ROW]] : tensor<64x64xf32> -> tensor<4096xf32>
// KERNEL-NEXT:      %[[CARRY:.*]] = tt.splat %[[TOTAL]]
// KERNEL-NEXT:      %[[C:.*]] = tt.add %[[FLAT]], %[[CARRY]]
// KERNEL-NEXT:      %[[CHUNK:.*]] = tt.reduce_sum %[[P]]
// KERNEL-NEXT:      %[[NEXT:.*]] = tt.add %[[TOTAL]], %[[CHUNK]]
// KERNEL:           tt.cmp "lt", %[[C]]
// KERNEL:           scf.yield %{{.*}}, %[[NEXT]]
// KERNEL-NOT:     scf.for
// KERNEL:         tt.store

// Layer norm written through var: the user's mean and var's are one reduction (the tracer emits
// each reduction once), the variance pairs with it (Chan's merge): 8 rows of 40000 are split over programs
// meeting at grid barriers, one launch.

func.func @layernorm(%x: tensor<8x40000xf32>, %w: tensor<40000xf32>, %b: tensor<40000xf32>) -> tensor<8x40000xf32> {
  %0 = tta.reduce_mean %x axis = 1 keepdims : tensor<8x40000xf32> -> tensor<8x1xf32>
  %1 = tta.sub %x, %0 : tensor<8x40000xf32>, tensor<8x1xf32> -> tensor<8x40000xf32>
  %2 = tta.mul %1, %1 : tensor<8x40000xf32>, tensor<8x40000xf32> -> tensor<8x40000xf32>
  %3 = tta.reduce_mean %2 axis = 1 keepdims : tensor<8x40000xf32> -> tensor<8x1xf32>
  %4 = tta.constant 1.000000e-05 : f32 -> f32
  %5 = tta.add %3, %4 : tensor<8x1xf32>, f32 -> tensor<8x1xf32>
  %6 = tta.sqrt %5 : tensor<8x1xf32>
  %7 = tta.div %1, %6 : tensor<8x40000xf32>, tensor<8x1xf32> -> tensor<8x40000xf32>
  %8 = tta.mul %7, %w : tensor<8x40000xf32>, tensor<40000xf32> -> tensor<8x40000xf32>
  %9 = tta.add %8, %b : tensor<8x40000xf32>, tensor<40000xf32> -> tensor<8x40000xf32>
  func.return %9 : tensor<8x40000xf32>
}

// CHECK-LABEL: func.func @layernorm
// CHECK-NEXT:    %0 = tta.fusion "row_reduction"(%x, %w, %b)
// CHECK:           tta.yield
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %0

// KERNEL-LABEL: builtin.module @layernorm_1_row_reduction
// KERNEL:         tt.grid_barrier
// KERNEL-NOT:     builtin.module @layernorm
// KERNEL:         tt.store %{{.*}} mask

// Argmax of a looped row: each chunk's best value and index (one tt.reduce of both, ties and NaN to
// the lowest index), kept across chunks only when strictly better.

func.func @argmax(%x: tensor<8x40000xf16>) -> tensor<8xi64> {
  %0 = tta.argmax %x axis = 1 : tensor<8x40000xf16> -> tensor<8xi64>
  func.return %0 : tensor<8xi64>
}

// KERNEL-LABEL: builtin.module @argmax_2_row_reduction
// KERNEL:         %[[V:.*]], %[[I:.*]] = scf.for {{.*}} iter_args(%[[BEST:.*]] = %{{.*}}, %[[AT:.*]] = %{{.*}}) -> (f32, i32)
// KERNEL:           %[[CV:.*]], %[[CI:.*]] = "tt.reduce"(%{{.*}}, %{{.*}}) <{axis = 0 : i32}>
// KERNEL:             tt.combine_yield %{{.*}}, %{{.*}} : f32, i32
// KERNEL:           %[[GT:.*]] = tt.cmp "gt", %[[CV]], %[[BEST]]
// KERNEL:           scf.yield
// KERNEL:         %[[I64:.*]] = tt.cast %[[I]] : i32 -> i64
// KERNEL:         tt.store %{{.*}}, %[[I64]] : !tt.ptr<i64>, i64
