// RUN: tinyton-opt %s -p tinyton-fuse,tinyton-fusion-to-kernels | filecheck %s

// A gather by int64 indices (torch's token ids, NumPy's default): the bounds are checked in int64, and only
// then is the index narrowed to the i32 the kernel indexes with, so 2**32 + 1 is out of bounds (NumPy's
// IndexError), not row 1. Narrower indices widen to i32 first.

func.func @embed(%t: tensor<96x16xf32>, %i: tensor<4x8xi64>) -> tensor<4x8x16xf32> {
  %z = tta.take %t, %i axis = 0 : tensor<96x16xf32>, tensor<4x8xi64> -> tensor<4x8x16xf32>
  func.return %z : tensor<4x8x16xf32>
}

// CHECK-LABEL: func.func @embed_0_take
// CHECK:         %[[IDX:.+]] = tt.load %{{.+}} : tensor<{{.+}}x!tt.ptr<i64>> -> tensor<[[N:.+]]xi64>
// CHECK:         %[[LT:.+]] = tt.cmp "lt", %[[IDX]], %{{.+}} : tensor<[[N]]xi64> -> tensor<[[N]]xi1>
// CHECK:         tt.constant -96 : i64
// CHECK:         %[[GE:.+]] = tt.cmp "ge", %[[IDX]], %{{.+}} : tensor<[[N]]xi64> -> tensor<[[N]]xi1>
// CHECK:         %[[IN:.+]] = tt.and %[[GE]], %[[LT]]
// CHECK:         tt.assert %[[IN]], "index out of bounds for axis 0 with size 96 (IndexError in NumPy)"
// CHECK-NEXT:    %[[NARROW:.+]] = tt.cast %[[IDX]] : tensor<[[N]]xi64> -> tensor<[[N]]xi32>
// CHECK:         tt.load %{{.+}} mask %[[IN]]

func.func @small(%t: tensor<300x4xf32>, %i: tensor<8xi8>) -> tensor<8x4xf32> {
  %z = tta.take %t, %i axis = 0 : tensor<300x4xf32>, tensor<8xi8> -> tensor<8x4xf32>
  func.return %z : tensor<8x4xf32>
}

// CHECK-LABEL: func.func @small_1_take
// CHECK:         %[[IDX8:.+]] = tt.load %{{.+}} -> tensor<[[M:.+]]xi8>
// CHECK:         %[[WIDE:.+]] = tt.cast %[[IDX8]] : tensor<[[M]]xi8> -> tensor<[[M]]xi32>
// CHECK:         tt.constant 300 : i32
// CHECK:         tt.cmp "lt", %[[WIDE]]
