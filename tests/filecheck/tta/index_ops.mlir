// RUN: TT_ROUNDTRIP

// tta.slice (strided windows, padded with a fill or unspecified outside the input) and tta.concatenate.

func.func @index_ops(%x: tensor<4x6xf32>, %y: tensor<4x2xf32>) -> (tensor<2x3xf32>, tensor<6x8xf32>, tensor<4x8xf32>, tensor<5x6xf32>) {
  %a = tta.slice %x start = [3, 0] step = [-2, 2] : tensor<4x6xf32> -> tensor<2x3xf32>
  %b = tta.slice %x start = [-1, -1] step = [1, 1] fill 0.000000e+00 : f32 : tensor<4x6xf32> -> tensor<6x8xf32>
  %c = tta.concatenate %x, %y axis = 1 : tensor<4x6xf32>, tensor<4x2xf32> -> tensor<4x8xf32>
  %d = tta.slice %x start = [0, 0] step = [0, 1] : tensor<4x6xf32> -> tensor<5x6xf32>
  func.return %a, %b, %c, %d : tensor<2x3xf32>, tensor<6x8xf32>, tensor<4x8xf32>, tensor<5x6xf32>
}

// CHECK:      %a = tta.slice %x start = [3, 0] step = [-2, 2] : tensor<4x6xf32> -> tensor<2x3xf32>
// CHECK-NEXT: %b = tta.slice %x start = [-1, -1] step = [1, 1] fill 0.000000e+00 : f32 : tensor<4x6xf32> -> tensor<6x8xf32>
// CHECK-NEXT: %c = tta.concatenate %x, %y axis = 1 : tensor<4x6xf32>, tensor<4x2xf32> -> tensor<4x8xf32>
// CHECK-NEXT: %d = tta.slice %x start = [0, 0] step = [0, 1] : tensor<4x6xf32> -> tensor<5x6xf32>
