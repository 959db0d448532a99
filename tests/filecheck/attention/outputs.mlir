// RUN: tinyton-opt %s -p tinyton-flash-attention | filecheck %s

// What the attention region returns: `p @ v` in each layout the program reads it in (the transposes and reshapes
// that lay it out again join the region: the kernel stores through them), and the rows' logsumexp when the program
// keeps it (a training step's forward): one kernel stores them all.

// Heads merged back for the output projection: the region returns the merged array, no transpose kernel after it.
func.func @merged(%q: tensor<2x4x16x8xf32>, %kt: tensor<2x4x8x16xf32>, %v: tensor<2x4x16x8xf32>) -> tensor<2x16x32xf32> {
  %qk = tta.matmul %q, %kt : tensor<2x4x16x8xf32>, tensor<2x4x8x16xf32> -> tensor<2x4x16x16xf32>
  %m = tta.reduce_max %qk axis = 3 keepdims : tensor<2x4x16x16xf32> -> tensor<2x4x16x1xf32>
  %d = tta.sub %qk, %m : tensor<2x4x16x16xf32>, tensor<2x4x16x1xf32> -> tensor<2x4x16x16xf32>
  %e = tta.exp %d : tensor<2x4x16x16xf32>
  %l = tta.reduce_sum %e axis = 3 keepdims : tensor<2x4x16x16xf32> -> tensor<2x4x16x1xf32>
  %p = tta.div %e, %l : tensor<2x4x16x16xf32>, tensor<2x4x16x1xf32> -> tensor<2x4x16x16xf32>
  %o = tta.matmul %p, %v : tensor<2x4x16x16xf32>, tensor<2x4x16x8xf32> -> tensor<2x4x16x8xf32>
  %t = tta.transpose %o permutation = [0, 2, 1, 3] : tensor<2x4x16x8xf32> -> tensor<2x16x4x8xf32>
  %y = tta.reshape %t : tensor<2x16x4x8xf32> -> tensor<2x16x32xf32>
  func.return %y : tensor<2x16x32xf32>
}
// CHECK-LABEL: func.func @merged
// CHECK-NEXT:    %y = tta.fusion "attention"
// CHECK:           %o = tta.matmul %p, %v_1
// CHECK-NEXT:      %t = tta.transpose %o permutation = [0, 2, 1, 3]
// CHECK-NEXT:      %y_1 = tta.reshape %t
// CHECK-NEXT:      tta.yield %y_1
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %y

// Kept as computed and merged, with the logsumexp `m + log(l)` of its own softmax: three results of one region.
func.func @training_forward(%q: tensor<2x4x16x8xf32>, %kt: tensor<2x4x8x16xf32>, %v: tensor<2x4x16x8xf32>)
    -> (tensor<2x4x16x8xf32>, tensor<2x16x32xf32>, tensor<2x4x16x1xf32>) {
  %qk = tta.matmul %q, %kt : tensor<2x4x16x8xf32>, tensor<2x4x8x16xf32> -> tensor<2x4x16x16xf32>
  %m = tta.reduce_max %qk axis = 3 keepdims : tensor<2x4x16x16xf32> -> tensor<2x4x16x1xf32>
  %d = tta.sub %qk, %m : tensor<2x4x16x16xf32>, tensor<2x4x16x1xf32> -> tensor<2x4x16x16xf32>
  %e = tta.exp %d : tensor<2x4x16x16xf32>
  %l = tta.reduce_sum %e axis = 3 keepdims : tensor<2x4x16x16xf32> -> tensor<2x4x16x1xf32>
  %p = tta.div %e, %l : tensor<2x4x16x16xf32>, tensor<2x4x16x1xf32> -> tensor<2x4x16x16xf32>
  %o = tta.matmul %p, %v : tensor<2x4x16x16xf32>, tensor<2x4x16x8xf32> -> tensor<2x4x16x8xf32>
  %t = tta.transpose %o permutation = [0, 2, 1, 3] : tensor<2x4x16x8xf32> -> tensor<2x16x4x8xf32>
  %y = tta.reshape %t : tensor<2x16x4x8xf32> -> tensor<2x16x32xf32>
  %log = tta.log %l : tensor<2x4x16x1xf32>
  %lse = tta.add %m, %log : tensor<2x4x16x1xf32>, tensor<2x4x16x1xf32> -> tensor<2x4x16x1xf32>
  func.return %o, %y, %lse : tensor<2x4x16x8xf32>, tensor<2x16x32xf32>, tensor<2x4x16x1xf32>
}
// CHECK-LABEL: func.func @training_forward
// CHECK-NEXT:    %o, %y, %lse = tta.fusion "attention"
// CHECK:           %y_1 = tta.reshape %t
// CHECK-NEXT:      %log = tta.log %l
// CHECK-NEXT:      %lse_1 = tta.add %m, %log
// CHECK-NEXT:      tta.yield %o_1, %y_1, %lse_1
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %o, %y, %lse

// A logsumexp of other statistics than the softmax's own is not the attention's: the rewrite refuses.
func.func @other_statistics(%q: tensor<16x8xf32>, %kt: tensor<8x16xf32>, %v: tensor<16x8xf32>)
    -> (tensor<16x8xf32>, tensor<16x1xf32>) {
  %qk = tta.matmul %q, %kt : tensor<16x8xf32>, tensor<8x16xf32> -> tensor<16x16xf32>
  %m = tta.reduce_max %qk axis = 1 keepdims : tensor<16x16xf32> -> tensor<16x1xf32>
  %d = tta.sub %qk, %m : tensor<16x16xf32>, tensor<16x1xf32> -> tensor<16x16xf32>
  %e = tta.exp %d : tensor<16x16xf32>
  %l = tta.reduce_sum %e axis = 1 keepdims : tensor<16x16xf32> -> tensor<16x1xf32>
  %p = tta.div %e, %l : tensor<16x16xf32>, tensor<16x1xf32> -> tensor<16x16xf32>
  %o = tta.matmul %p, %v : tensor<16x16xf32>, tensor<16x8xf32> -> tensor<16x8xf32>
  %twice = tta.add %m, %m : tensor<16x1xf32>, tensor<16x1xf32> -> tensor<16x1xf32>
  func.return %o, %twice : tensor<16x8xf32>, tensor<16x1xf32>
}
// CHECK-LABEL: func.func @other_statistics
// CHECK-NOT:     "attention"
// CHECK:         func.return
