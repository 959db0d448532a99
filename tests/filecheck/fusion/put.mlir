// RUN: tinyton-opt %s -p tinyton-in-place | filecheck %s
// RUN: tinyton-opt %s -p tinyton-fuse | filecheck %s --check-prefix=FUSE
// RUN: tinyton-opt %s -p tinyton-fuse,tinyton-fusion-to-kernels | filecheck %s --check-prefix=KERNEL

// A put writes into its destination's buffer: tinyton-in-place makes that safe. Readers of the old value
// that can run before the put are moved before it (the sum); those that cannot (the return of the old
// value, an add that also reads the new one) read a copy taken before it (a same-type cast, fused into a
// kernel that reads x anyway). The put's kernel stores the new row at the run-time position only.

func.func @cache_row(%c: tensor<2x16x4xbf16>, %r: tensor<2x1x4xf32>, %pos: tensor<1xi32>) -> tensor<2x16x4xbf16> attributes {tta.updates = array<i64: 0>} {
  %rb = tta.cast %r : tensor<2x1x4xf32> -> tensor<2x1x4xbf16>
  %new = tta.put %c[%pos : tensor<1xi32>] = %rb start = [0, 0, 0] step = [1, 1, 1] axis 1 : tensor<2x16x4xbf16>, tensor<2x1x4xbf16>
  func.return %new : tensor<2x16x4xbf16>
}

func.func @readers(%x: tensor<8xf32>) -> (f32, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) attributes {tta.updates = array<i64: 0>} {
  %one = tta.constant 1.000000e+00 : f32 -> f32
  %v = tta.broadcast_to %one : f32 -> tensor<2xf32>
  %new = tta.put %x[] = %v start = [0] step = [1] : tensor<8xf32>, tensor<2xf32>
  %sum = tta.reduce_sum %x axis = 0 : tensor<8xf32> -> f32
  %both = tta.add %x, %new : tensor<8xf32>, tensor<8xf32> -> tensor<8xf32>
  func.return %sum, %x, %both, %new : f32, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>
}

// CHECK-LABEL: func.func @cache_row
// CHECK-NEXT:    %rb = tta.cast
// CHECK-NEXT:    %new = tta.put %c[%pos : tensor<1xi32>] = %rb
// CHECK-NEXT:    func.return %new

// CHECK-LABEL: func.func @readers
// CHECK-NEXT:    %0 = tta.cast %x : tensor<8xf32> -> tensor<8xf32>
// CHECK:         %sum = tta.reduce_sum %x
// CHECK-NEXT:    %new = tta.put %x[] = %v
// CHECK-NEXT:    %both = tta.add %0, %new
// CHECK-NEXT:    func.return %sum, %0, %both, %new

// FUSE-LABEL: func.func @cache_row
// FUSE-NEXT:    %new = tta.fusion "elementwise"(%r, %c, %pos)
// FUSE:           tta.put
// FUSE-NOT:     tta.fusion
// FUSE-LABEL: func.func @readers
// FUSE-NEXT:    %0, %sum = tta.fusion "row_reduction"(%x)
// FUSE:         %new = tta.fusion "elementwise"(%x)
// FUSE:         %both = tta.fusion "elementwise"(%0, %new)

// KERNEL-LABEL: builtin.module @cache_row_0_elementwise
// KERNEL:         %[[ROW:.+]] = tt.load %{{.+}} : tensor<8x!tt.ptr<f32>> -> tensor<8xf32>
// KERNEL:         %[[POS:.+]] = tt.load %pos : !tt.ptr<i32> -> i32
// KERNEL:         %[[NEW:.+]] = tt.cast %[[ROW]] : tensor<8xf32> -> tensor<8xbf16>
// KERNEL:         tt.assert %{{.+}}, "index out of bounds for axis 1 with size 16 (IndexError in NumPy)"
// KERNEL:         %[[AT:.+]] = tt.select %{{.+}}, %{{.+}}, %[[POS]] : i1, i32
// KERNEL:         tt.mul %[[AT]], %{{.+}} : i32
// KERNEL:         tt.store %{{.+}}, %[[NEW]] mask %{{.+}} : tensor<8x!tt.ptr<bf16>>, tensor<8xbf16>, tensor<8xi1>
// KERNEL-NEXT:    func.return
