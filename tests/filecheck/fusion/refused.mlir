// RUN: tinyton-opt %s -p tinyton-fuse-patterns | filecheck %s --check-prefix=PATTERN
// RUN: tinyton-opt %s -p tinyton-fuse | filecheck %s

// exp(x - max) is also returned: the softmax pattern refuses (a template kernel writes only its
// root), but general fusion still makes one row kernel writing both results.

func.func @intermediate_used(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %m = tta.reduce_max %x axis = 1 keepdims : tensor<4x8xf32> -> tensor<4x1xf32>
  %s = tta.sub %x, %m : tensor<4x8xf32>, tensor<4x1xf32> -> tensor<4x8xf32>
  %e = tta.exp %s : tensor<4x8xf32>
  %d = tta.reduce_sum %e axis = 1 keepdims : tensor<4x8xf32> -> tensor<4x1xf32>
  %r = tta.div %e, %d : tensor<4x8xf32>, tensor<4x1xf32> -> tensor<4x8xf32>
  func.return %r, %e : tensor<4x8xf32>, tensor<4x8xf32>
}

// PATTERN-LABEL: func.func @intermediate_used
// PATTERN-NOT:     tta.fusion
// PATTERN:         func.return %r, %e

// CHECK-LABEL: func.func @intermediate_used
// CHECK-NEXT:    %e, %r = tta.fusion "row_reduction"(%x) : (tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>)
// CHECK-NOT:     tta.fusion
// CHECK:         func.return %r, %e

// The max is read twice outside the chain: refused as well.

func.func @max_used_twice(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x1xf32>) {
  %m = tta.reduce_max %x axis = 1 keepdims : tensor<4x8xf32> -> tensor<4x1xf32>
  %s = tta.sub %x, %m : tensor<4x8xf32>, tensor<4x1xf32> -> tensor<4x8xf32>
  %e = tta.exp %s : tensor<4x8xf32>
  %d = tta.reduce_sum %e axis = 1 keepdims : tensor<4x8xf32> -> tensor<4x1xf32>
  %r = tta.div %e, %d : tensor<4x8xf32>, tensor<4x1xf32> -> tensor<4x8xf32>
  func.return %r, %m : tensor<4x8xf32>, tensor<4x1xf32>
}

// PATTERN-LABEL: func.func @max_used_twice
// PATTERN-NOT:     tta.fusion
// PATTERN:         func.return

// CHECK-LABEL: func.func @max_used_twice
// CHECK-NEXT:    %m, %r = tta.fusion "row_reduction"(%x)
// CHECK-NOT:     tta.fusion
// CHECK:         func.return %r, %m

// Max over axis 0 but sum over axis 1: no softmax, and no single kernel either (two domains).

func.func @mismatched_axes(%x: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %m = tta.reduce_max %x axis = 0 keepdims : tensor<8x8xf32> -> tensor<1x8xf32>
  %s = tta.sub %x, %m : tensor<8x8xf32>, tensor<1x8xf32> -> tensor<8x8xf32>
  %e = tta.exp %s : tensor<8x8xf32>
  %d = tta.reduce_sum %e axis = 1 keepdims : tensor<8x8xf32> -> tensor<8x1xf32>
  %r = tta.div %e, %d : tensor<8x8xf32>, tensor<8x1xf32> -> tensor<8x8xf32>
  func.return %r : tensor<8x8xf32>
}

// PATTERN-LABEL: func.func @mismatched_axes
// PATTERN-NOT:     tta.fusion
// PATTERN:         func.return %r

// CHECK-LABEL: func.func @mismatched_axes
// CHECK-NOT:     "softmax"
// CHECK:         tta.fusion "reduction"(%x)
// CHECK:           tta.reduce_max {{.*}} axis = 0
// CHECK:         tta.fusion "row_reduction"
// CHECK:           tta.reduce_sum {{.*}} axis = 1
// CHECK:         func.return

// Without keepdims the pattern does not apply (the keepdims handle is shared by both reductions);
// general fusion sees through the reshape that broadcasts the row maxima back.

func.func @no_keepdims(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %m = tta.reduce_max %x axis = 1 : tensor<4x8xf32> -> tensor<4xf32>
  %m2 = tta.reshape %m : tensor<4xf32> -> tensor<4x1xf32>
  %s = tta.sub %x, %m2 : tensor<4x8xf32>, tensor<4x1xf32> -> tensor<4x8xf32>
  %e = tta.exp %s : tensor<4x8xf32>
  %d = tta.reduce_sum %e axis = 1 keepdims : tensor<4x8xf32> -> tensor<4x1xf32>
  %r = tta.div %e, %d : tensor<4x8xf32>, tensor<4x1xf32> -> tensor<4x8xf32>
  func.return %r : tensor<4x8xf32>
}

// PATTERN-LABEL: func.func @no_keepdims
// PATTERN-NOT:     tta.fusion

// CHECK-LABEL: func.func @no_keepdims
// CHECK-NEXT:    %r = tta.fusion "row_reduction"(%x)
// CHECK-NOT:     tta.fusion
// CHECK:         func.return %r

// 2**31 elements: beyond 32-bit indexing, the size-limit constraint refuses the pattern (and the
// general step cannot build a kernel for these ops either).

func.func @too_large(%x: tensor<65536x32768xf32>) -> tensor<65536x32768xf32> {
  %m = tta.reduce_max %x axis = 1 keepdims : tensor<65536x32768xf32> -> tensor<65536x1xf32>
  %s = tta.sub %x, %m : tensor<65536x32768xf32>, tensor<65536x1xf32> -> tensor<65536x32768xf32>
  %e = tta.exp %s : tensor<65536x32768xf32>
  %d = tta.reduce_sum %e axis = 1 keepdims : tensor<65536x32768xf32> -> tensor<65536x1xf32>
  %r = tta.div %e, %d : tensor<65536x32768xf32>, tensor<65536x1xf32> -> tensor<65536x32768xf32>
  func.return %r : tensor<65536x32768xf32>
}

// PATTERN-LABEL: func.func @too_large
// PATTERN-NOT:     tta.fusion
// PATTERN:         func.return %r

// CHECK-LABEL: func.func @too_large
// CHECK-NOT:     "softmax"
// CHECK:         func.return %r
