// RUN: tinyton-opt %s | filecheck %s
// RUN: tinyton-opt %s --print-op-generic | tinyton-opt | filecheck %s

// A fusion region: operands are the external inputs, one block argument each, `tta.yield` ends it.

func.func @softmax(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %y = tta.fusion "softmax"(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%a: tensor<4x8xf32>):
    %m = tta.reduce_max %a axis = 1 keepdims : tensor<4x8xf32> -> tensor<4x1xf32>
    %s = tta.sub %a, %m : tensor<4x8xf32>, tensor<4x1xf32> -> tensor<4x8xf32>
    %e = tta.exp %s : tensor<4x8xf32>
    %d = tta.reduce_sum %e axis = 1 keepdims : tensor<4x8xf32> -> tensor<4x1xf32>
    %r = tta.div %e, %d : tensor<4x8xf32>, tensor<4x1xf32> -> tensor<4x8xf32>
    tta.yield %r : tensor<4x8xf32>
  }
  func.return %y : tensor<4x8xf32>
}

// CHECK:      %y = tta.fusion "softmax"(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32> {
// CHECK-NEXT: ^bb0(%a: tensor<4x8xf32>):
// CHECK-NEXT:   %m = tta.reduce_max %a axis = 1 keepdims : tensor<4x8xf32> -> tensor<4x1xf32>
// CHECK:        tta.yield %r : tensor<4x8xf32>
// CHECK-NEXT: }

func.func @two_results(%x: tensor<4x8xf32>, %w: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4xf32>) {
  %y, %s = tta.fusion "row_reduction"(%x, %w) : (tensor<4x8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4xf32>) {
  ^bb0(%a: tensor<4x8xf32>, %b: tensor<8xf32>):
    %p = tta.mul %a, %b : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
    %r = tta.reduce_sum %p axis = 1 : tensor<4x8xf32> -> tensor<4xf32>
    tta.yield %p, %r : tensor<4x8xf32>, tensor<4xf32>
  }
  func.return %y, %s : tensor<4x8xf32>, tensor<4xf32>
}

// CHECK:      %y, %s = tta.fusion "row_reduction"(%x, %w) : (tensor<4x8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4xf32>) {
// CHECK-NEXT: ^bb0(%a: tensor<4x8xf32>, %b: tensor<8xf32>):
// CHECK:        tta.yield %p, %r : tensor<4x8xf32>, tensor<4xf32>
