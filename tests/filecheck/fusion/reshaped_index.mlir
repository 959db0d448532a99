// RUN: tinyton-opt %s -p tinyton-fuse | filecheck %s

// An index array computed in registers and reshaped onto another axis (`(arange(T) == pos)[:, None]`,
// a decode step's cache row) does not broadcast against the result as NumPy aligns it: the domain is the
// outputs' shape and the arange runs along the only axis of its extent. One kernel, not two.

func.func @cache_row(%pos: tensor<1xi32>, %row: tensor<4x1x4xf32>, %cache: tensor<4x16x4xf32>) -> tensor<4x16x4xf32> {
  %t = tta.arange 0 to 16 : tensor<16xi32>
  %here = tta.cmp "eq", %t, %pos : tensor<16xi32>, tensor<1xi32> -> tensor<16xi1>
  %col = tta.reshape %here : tensor<16xi1> -> tensor<16x1xi1>
  %k = tta.where %col, %row, %cache : tensor<16x1xi1>, tensor<4x1x4xf32>, tensor<4x16x4xf32> -> tensor<4x16x4xf32>
  func.return %k : tensor<4x16x4xf32>
}

// CHECK-LABEL: func.func @cache_row
// CHECK-NEXT:    %k = tta.fusion "elementwise"(%pos, %row, %cache)
// CHECK:           tta.arange
// CHECK:           tta.where
// CHECK-NOT:     tta.fusion
