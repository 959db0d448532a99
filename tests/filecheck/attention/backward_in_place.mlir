// RUN: tinyton-opt %s -p tinyton-flash-attention | filecheck %s
// RUN: tinyton-opt %s -p tinyton-fuse | filecheck %s --check-prefix=FUSE

// A training step's backward as a model lays its operands out (traced from tests/test_attention_backward.py
// `packed_gradient`): q, k and v windows of one qkv projection with their heads split, o and do `(B, S, C)` split
// likewise, and dq, dk and dv merged back and concatenated, the packed projection's gradient. The view ops on both
// sides join the one "attention_backward" region: its kernels read the operands and store the gradients through
// their strides, no copy kernel before or after (push-slices keeps the concatenation whole for it).

func.func @packed_gradient(%a: tensor<1x8x48xf32>, %b: tensor<1x8x16xf32>, %c: tensor<1x2x8x1xf32>, %d: tensor<1x8x16xf32>) -> tensor<1x8x48xf32> {
  %0 = tta.slice %a start = [0, 0, 0] step = [1, 1, 1] : tensor<1x8x48xf32> -> tensor<1x8x16xf32>
  %1 = tta.reshape %0 : tensor<1x8x16xf32> -> tensor<1x8x2x8xf32>
  %2 = tta.transpose %1 permutation = [0, 2, 1, 3] : tensor<1x8x2x8xf32> -> tensor<1x2x8x8xf32>
  %3 = tta.slice %a start = [0, 0, 16] step = [1, 1, 1] : tensor<1x8x48xf32> -> tensor<1x8x16xf32>
  %4 = tta.reshape %3 : tensor<1x8x16xf32> -> tensor<1x8x2x8xf32>
  %5 = tta.transpose %4 permutation = [0, 2, 1, 3] : tensor<1x8x2x8xf32> -> tensor<1x2x8x8xf32>
  %6 = tta.slice %a start = [0, 0, 32] step = [1, 1, 1] : tensor<1x8x48xf32> -> tensor<1x8x16xf32>
  %7 = tta.reshape %6 : tensor<1x8x16xf32> -> tensor<1x8x2x8xf32>
  %8 = tta.transpose %7 permutation = [0, 2, 1, 3] : tensor<1x8x2x8xf32> -> tensor<1x2x8x8xf32>
  %9 = tta.reshape %b : tensor<1x8x16xf32> -> tensor<1x8x2x8xf32>
  %10 = tta.transpose %9 permutation = [0, 2, 1, 3] : tensor<1x8x2x8xf32> -> tensor<1x2x8x8xf32>
  %11 = tta.reshape %d : tensor<1x8x16xf32> -> tensor<1x8x2x8xf32>
  %12 = tta.transpose %11 permutation = [0, 2, 1, 3] : tensor<1x8x2x8xf32> -> tensor<1x2x8x8xf32>
  %13 = tta.transpose %5 permutation = [0, 1, 3, 2] : tensor<1x2x8x8xf32> -> tensor<1x2x8x8xf32>
  %14 = tta.matmul %2, %13 : tensor<1x2x8x8xf32>, tensor<1x2x8x8xf32> -> tensor<1x2x8x8xf32>
  %15 = tta.constant 1.250000e-01 : f32 -> f32
  %16 = tta.mul %14, %15 : tensor<1x2x8x8xf32>, f32 -> tensor<1x2x8x8xf32>
  %17 = tta.sub %16, %c : tensor<1x2x8x8xf32>, tensor<1x2x8x1xf32> -> tensor<1x2x8x8xf32>
  %18 = tta.exp %17 : tensor<1x2x8x8xf32>
  %19 = tta.transpose %8 permutation = [0, 1, 3, 2] : tensor<1x2x8x8xf32> -> tensor<1x2x8x8xf32>
  %20 = tta.matmul %12, %19 : tensor<1x2x8x8xf32>, tensor<1x2x8x8xf32> -> tensor<1x2x8x8xf32>
  %21 = tta.mul %12, %10 : tensor<1x2x8x8xf32>, tensor<1x2x8x8xf32> -> tensor<1x2x8x8xf32>
  %22 = tta.reduce_sum %21 axis = 3 keepdims : tensor<1x2x8x8xf32> -> tensor<1x2x8x1xf32>
  %23 = tta.sub %20, %22 : tensor<1x2x8x8xf32>, tensor<1x2x8x1xf32> -> tensor<1x2x8x8xf32>
  %24 = tta.mul %18, %23 : tensor<1x2x8x8xf32>, tensor<1x2x8x8xf32> -> tensor<1x2x8x8xf32>
  %25 = tta.matmul %24, %5 : tensor<1x2x8x8xf32>, tensor<1x2x8x8xf32> -> tensor<1x2x8x8xf32>
  %26 = tta.mul %25, %15 : tensor<1x2x8x8xf32>, f32 -> tensor<1x2x8x8xf32>
  %27 = tta.transpose %24 permutation = [0, 1, 3, 2] : tensor<1x2x8x8xf32> -> tensor<1x2x8x8xf32>
  %28 = tta.matmul %27, %2 : tensor<1x2x8x8xf32>, tensor<1x2x8x8xf32> -> tensor<1x2x8x8xf32>
  %29 = tta.mul %28, %15 : tensor<1x2x8x8xf32>, f32 -> tensor<1x2x8x8xf32>
  %30 = tta.transpose %18 permutation = [0, 1, 3, 2] : tensor<1x2x8x8xf32> -> tensor<1x2x8x8xf32>
  %31 = tta.matmul %30, %12 : tensor<1x2x8x8xf32>, tensor<1x2x8x8xf32> -> tensor<1x2x8x8xf32>
  %32 = tta.transpose %26 permutation = [0, 2, 1, 3] : tensor<1x2x8x8xf32> -> tensor<1x8x2x8xf32>
  %33 = tta.reshape %32 : tensor<1x8x2x8xf32> -> tensor<1x8x16xf32>
  %34 = tta.transpose %29 permutation = [0, 2, 1, 3] : tensor<1x2x8x8xf32> -> tensor<1x8x2x8xf32>
  %35 = tta.reshape %34 : tensor<1x8x2x8xf32> -> tensor<1x8x16xf32>
  %36 = tta.transpose %31 permutation = [0, 2, 1, 3] : tensor<1x2x8x8xf32> -> tensor<1x8x2x8xf32>
  %37 = tta.reshape %36 : tensor<1x8x2x8xf32> -> tensor<1x8x16xf32>
  %38 = tta.concatenate %33, %35, %37 axis = 2 : tensor<1x8x16xf32>, tensor<1x8x16xf32>, tensor<1x8x16xf32> -> tensor<1x8x48xf32>
  func.return %38 : tensor<1x8x48xf32>
}
// CHECK-LABEL: func.func @packed_gradient
// CHECK-NEXT:    %{{.*}} = tta.fusion "attention_backward"(%a, %b, %d, %c) : {{.*}} -> tensor<1x8x48xf32> {
// CHECK:           tta.slice
// CHECK:           tta.concatenate
// CHECK-NEXT:      tta.yield
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return
// FUSE-LABEL: func.func @packed_gradient
// FUSE-NEXT:    tta.fusion "attention_backward"
// FUSE-NOT:     tta.fusion
// FUSE:         func.return
