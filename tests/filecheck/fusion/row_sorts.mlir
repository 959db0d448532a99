// RUN: tinyton-opt %s -p tinyton-fuse | filecheck %s
// RUN: tinyton-opt %s -p tinyton-fuse,tinyton-fusion-to-kernels | filecheck %s --check-prefix=KERNEL

// A sort and an argsort of one computed row are one kernel with their producer: the row (12 of 16 lanes) is
// sorted whole in registers by the bitonic network on (value, index) pairs, shared by both results; the lanes
// past the row hold NaN (the last value of the order), so they sort after it. 4 merge stages of 1 to 4
// compare-and-swap steps: 10 steps, each finding the partners of a value and an index (two xor reductions
// over a size-2 dim of the [2, 2, 2, 2] cube).

func.func @sorted(%x: tensor<3x12xf32>) -> (tensor<3x12xf32>, tensor<3x12xi64>) {
  %c = tta.constant 2.000000e+00 : f32 -> f32
  %0 = tta.mul %x, %c : tensor<3x12xf32>, f32 -> tensor<3x12xf32>
  %1 = tta.sort %0 axis = 1 : tensor<3x12xf32> -> tensor<3x12xf32>
  %2 = tta.argsort %0 axis = 1 : tensor<3x12xf32> -> tensor<3x12xi64>
  func.return %1, %2 : tensor<3x12xf32>, tensor<3x12xi64>
}

// CHECK-LABEL: func.func @sorted
// CHECK-NEXT:    %0, %1 = tta.fusion "row_reduction"(%x)
// CHECK:           tta.mul
// CHECK-DAG:       tta.sort %{{.*}} axis = 1 : tensor<3x12xf32> -> tensor<3x12xf32>
// CHECK-DAG:       tta.argsort %{{.*}} axis = 1 : tensor<3x12xf32> -> tensor<3x12xi64>
// CHECK:           tta.yield

// KERNEL-LABEL: builtin.module @sorted_0_row_reduction
// KERNEL:         %[[NAN:.*]] = tt.constant 0x7fc00000 : f32
// KERNEL-NEXT:    %[[PAD:.*]] = tt.splat %[[NAN]]
// KERNEL-NEXT:    tt.select %{{.*}}, %{{.*}}, %[[PAD]] : tensor<16xi1>, tensor<16xf32>
// KERNEL:         tt.reshape %{{.*}} : tensor<16xf32> -> tensor<2x2x2x2xf32>
// KERNEL:         tt.reshape %{{.*}} : tensor<16xi32> -> tensor<2x2x2x2xi32>
// KERNEL-COUNT-20: "tt.reduce"
// KERNEL-NOT:     "tt.reduce"
// KERNEL:         tt.reshape %{{.*}} : tensor<2x2x2x2xf32> -> tensor<16xf32>
// KERNEL:         tt.reshape %{{.*}} : tensor<2x2x2x2xi32> -> tensor<16xi32>
// KERNEL:         tt.store {{.*}} : tensor<16x!tt.ptr<f32>>, tensor<16xf32>, tensor<16xi1>
// KERNEL:         tt.cast %{{.*}} : tensor<16xi32> -> tensor<16xi64>
// KERNEL:         tt.store {{.*}} : tensor<16x!tt.ptr<i64>>, tensor<16xi64>, tensor<16xi1>
