// RUN: tinyton-opt %s -p tinyton-check-indices | filecheck %s
// RUN: tinyton-opt %s -p tinyton-fuse | filecheck %s --check-prefix=FUSE
// RUN: tinyton-opt %s -p tinyton-fuse,tinyton-fusion-to-kernels | filecheck %s --check-prefix=KERNEL

// tinyton-check-indices: a gather of `arange(0, n)` is its indices, checked (`tta.check_index`): no arange in
// memory, and the check fuses with the index's readers (a torch scatter's one-hot) into one kernel.

func.func @one_hot(%i: tensor<4x1xi64>) -> tensor<4x8xi1> {
  %r = tta.arange 0 to 8 : tensor<8xi32>
  %c = tta.take %r, %i axis = 0 : tensor<8xi32>, tensor<4x1xi64> -> tensor<4x1xi32>
  %p = tta.reshape %r : tensor<8xi32> -> tensor<1x8xi32>
  %h = tta.cmp "eq", %p, %c : tensor<1x8xi32>, tensor<4x1xi32> -> tensor<4x8xi1>
  func.return %h : tensor<4x8xi1>
}

// CHECK-LABEL: func.func @one_hot
// CHECK-NEXT:    %r = tta.arange 0 to 8 : tensor<8xi32>
// CHECK-NEXT:    %c = tta.check_index %i size = 8 : tensor<4x1xi64> -> tensor<4x1xi32>
// CHECK-NOT:     tta.take

// FUSE-LABEL: func.func @one_hot
// FUSE-NEXT:    %h = tta.fusion "elementwise"(%i)
// FUSE-NOT:     tta.fusion
// FUSE:         func.return %h

// KERNEL-LABEL: builtin.module @one_hot_0_elementwise
// KERNEL:         %[[IDX:.+]] = tt.load %{{.+}} -> tensor<{{.+}}xi64>
// KERNEL:         tt.cmp "lt", %[[IDX]]
// KERNEL:         tt.cmp "ge", %[[IDX]]
// KERNEL:         tt.assert %{{.+}}, "index out of bounds for axis 0 with size 8 (IndexError in NumPy)"
// KERNEL:         tt.cast %[[IDX]] : tensor<{{.+}}xi64> -> tensor<{{.+}}xi32>
// KERNEL-NOT:     tt.load
// KERNEL:         tt.store

// A gather of an arange from another start, or along another axis than its one, stays a gather.
func.func @shifted(%i: tensor<4xi32>) -> tensor<4xi32> {
  %r = tta.arange 1 to 9 : tensor<8xi32>
  %c = tta.take %r, %i axis = 0 : tensor<8xi32>, tensor<4xi32> -> tensor<4xi32>
  func.return %c : tensor<4xi32>
}

// CHECK-LABEL: func.func @shifted
// CHECK-NEXT:    %r = tta.arange 1 to 9
// CHECK-NEXT:    %c = tta.take %r, %i axis = 0
