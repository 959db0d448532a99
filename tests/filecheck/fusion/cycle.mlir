// RUN: tinyton-opt %s -p tinyton-fuse | filecheck %s

// %e feeds a matmul (which takes no prologue) and the matmul's epilogue. Merging the exp into the
// epilogue's group is legal on its own but would make the group graph cyclic
// (exp -> matmul -> exp's group): refused. The matmul takes the multiply as its epilogue, the
// reduction gets its own kernel (a matmul kernel has no reductions): three kernels in order.

func.func @cycle(%x: tensor<16x16xf32>, %w: tensor<16x16xf32>) -> tensor<16x1xf32> {
  %e = tta.exp %x : tensor<16x16xf32>
  %p = tta.matmul %e, %w : tensor<16x16xf32>, tensor<16x16xf32> -> tensor<16x16xf32>
  %q = tta.mul %e, %p : tensor<16x16xf32>, tensor<16x16xf32> -> tensor<16x16xf32>
  %s = tta.reduce_sum %q axis = 1 keepdims : tensor<16x16xf32> -> tensor<16x1xf32>
  func.return %s : tensor<16x1xf32>
}

// CHECK-LABEL: func.func @cycle
// CHECK-NEXT:    %e = tta.fusion "elementwise"(%x)
// CHECK-NEXT:    ^bb0
// CHECK-NEXT:      %e_1 = tta.exp
// CHECK-NEXT:      tta.yield %e_1
// CHECK-NEXT:    }
// CHECK-NEXT:    %q = tta.fusion "matmul_epilogue"(%e, %w)
// CHECK-NEXT:    ^bb0
// CHECK-NEXT:      %p = tta.matmul
// CHECK-NEXT:      %q_1 = tta.mul
// CHECK-NEXT:      tta.yield %q_1
// CHECK-NEXT:    }
// CHECK-NEXT:    %s = tta.fusion "row_reduction"(%q)
// CHECK-NEXT:    ^bb0
// CHECK-NEXT:      %s_1 = tta.reduce_sum
// CHECK-NEXT:      tta.yield %s_1
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %s

// A transpose of a computed value needs memory, so the same holds with a layout change in the
// middle: exp -> transpose -> add(exp, transpose) cannot be one kernel, and the planner must not
// build a group that reads its own output. The transpose is a view absorbed by the add's kernel.

func.func @transpose_diamond(%x: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %e = tta.exp %x : tensor<8x8xf32>
  %t = tta.transpose %e permutation = [1, 0] : tensor<8x8xf32> -> tensor<8x8xf32>
  %y = tta.add %e, %t : tensor<8x8xf32>, tensor<8x8xf32> -> tensor<8x8xf32>
  func.return %y : tensor<8x8xf32>
}

// CHECK-LABEL: func.func @transpose_diamond
// CHECK-NEXT:    %e = tta.fusion "elementwise"(%x)
// CHECK:         %y = tta.fusion "elementwise"(%e)
// CHECK-NEXT:    ^bb0
// CHECK-NEXT:      %t = tta.transpose
// CHECK-NEXT:      %y_1 = tta.add
// CHECK:         func.return %y
