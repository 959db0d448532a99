// RUN: tinyton-opt %s -p tinyton-fuse-patterns | filecheck %s --check-prefix=PATTERN
// RUN: tinyton-opt %s -p tinyton-fuse | filecheck %s

// The five-op softmax chain becomes one "softmax" region, along the last axis of a 3-D array too.

func.func @softmax(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %m = tta.reduce_max %x axis = 1 keepdims : tensor<4x8xf32> -> tensor<4x1xf32>
  %s = tta.sub %x, %m : tensor<4x8xf32>, tensor<4x1xf32> -> tensor<4x8xf32>
  %e = tta.exp %s : tensor<4x8xf32>
  %d = tta.reduce_sum %e axis = 1 keepdims : tensor<4x8xf32> -> tensor<4x1xf32>
  %r = tta.div %e, %d : tensor<4x8xf32>, tensor<4x1xf32> -> tensor<4x8xf32>
  func.return %r : tensor<4x8xf32>
}

// PATTERN-LABEL: func.func @softmax
// PATTERN-NEXT:    %r = tta.fusion "softmax"(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32> {
// PATTERN-NEXT:    ^bb0(%x_1: tensor<4x8xf32>):
// PATTERN-NEXT:      %m = tta.reduce_max %x_1 axis = 1 keepdims
// PATTERN-NEXT:      %s = tta.sub %x_1, %m
// PATTERN-NEXT:      %e = tta.exp %s
// PATTERN-NEXT:      %d = tta.reduce_sum %e axis = 1 keepdims
// PATTERN-NEXT:      %r_1 = tta.div %e, %d
// PATTERN-NEXT:      tta.yield %r_1 : tensor<4x8xf32>
// PATTERN-NEXT:    }
// PATTERN-NEXT:    func.return %r : tensor<4x8xf32>

// CHECK-LABEL: func.func @softmax
// CHECK-NEXT:    %r = tta.fusion "softmax"(%x)
// CHECK-COUNT-5:   tta.
// CHECK-NEXT:      tta.yield %r_1
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %r

func.func @softmax_3d(%x: tensor<2x3x1000xf32>) -> tensor<2x3x1000xf32> {
  %m = tta.reduce_max %x axis = 2 keepdims : tensor<2x3x1000xf32> -> tensor<2x3x1xf32>
  %s = tta.sub %x, %m : tensor<2x3x1000xf32>, tensor<2x3x1xf32> -> tensor<2x3x1000xf32>
  %e = tta.exp %s : tensor<2x3x1000xf32>
  %d = tta.reduce_sum %e axis = 2 keepdims : tensor<2x3x1000xf32> -> tensor<2x3x1xf32>
  %r = tta.div %e, %d : tensor<2x3x1000xf32>, tensor<2x3x1xf32> -> tensor<2x3x1000xf32>
  func.return %r : tensor<2x3x1000xf32>
}

// CHECK-LABEL: func.func @softmax_3d
// CHECK-NEXT:    %r = tta.fusion "softmax"(%x) : (tensor<2x3x1000xf32>) -> tensor<2x3x1000xf32>
// CHECK-NOT:     tta.fusion
// CHECK:         func.return %r

// A scale before the softmax (x / sqrt(d), as in attention) joins the region as a prologue.

func.func @scaled_softmax(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %c = tta.constant 1.250000e-01 : f32 -> f32
  %y = tta.mul %x, %c : tensor<4x8xf32>, f32 -> tensor<4x8xf32>
  %m = tta.reduce_max %y axis = 1 keepdims : tensor<4x8xf32> -> tensor<4x1xf32>
  %s = tta.sub %y, %m : tensor<4x8xf32>, tensor<4x1xf32> -> tensor<4x8xf32>
  %e = tta.exp %s : tensor<4x8xf32>
  %d = tta.reduce_sum %e axis = 1 keepdims : tensor<4x8xf32> -> tensor<4x1xf32>
  %r = tta.div %e, %d : tensor<4x8xf32>, tensor<4x1xf32> -> tensor<4x8xf32>
  func.return %r : tensor<4x8xf32>
}

// PATTERN-LABEL: func.func @scaled_softmax
// PATTERN:         %y = tta.mul %x, %c
// PATTERN-NEXT:    %r = tta.fusion "softmax"(%y)

// CHECK-LABEL: func.func @scaled_softmax
// CHECK-NEXT:    %r = tta.fusion "softmax"(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32> {
// CHECK-NEXT:    ^bb0(%x_1: tensor<4x8xf32>):
// CHECK-NEXT:      %c = tta.constant 1.250000e-01 : f32 -> f32
// CHECK-NEXT:      %y = tta.mul %x_1, %c
// CHECK-NEXT:      %m = tta.reduce_max %y
// CHECK-NOT:     tta.fusion
// CHECK:         func.return %r

// Softmax along axis 0 is a softmax too (the codegen reduces along the tile's first axis).

func.func @softmax_axis0(%x: tensor<16x8xf32>) -> tensor<16x8xf32> {
  %m = tta.reduce_max %x axis = 0 keepdims : tensor<16x8xf32> -> tensor<1x8xf32>
  %s = tta.sub %x, %m : tensor<16x8xf32>, tensor<1x8xf32> -> tensor<16x8xf32>
  %e = tta.exp %s : tensor<16x8xf32>
  %d = tta.reduce_sum %e axis = 0 keepdims : tensor<16x8xf32> -> tensor<1x8xf32>
  %r = tta.div %e, %d : tensor<16x8xf32>, tensor<1x8xf32> -> tensor<16x8xf32>
  func.return %r : tensor<16x8xf32>
}

// CHECK-LABEL: func.func @softmax_axis0
// CHECK-NEXT:    %r = tta.fusion "softmax"(%x)
