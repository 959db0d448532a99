// RUN: tinyton-opt %s -p tinyton-fuse | filecheck %s

// A chain of elementwise ops with broadcasting, comparisons, where and casts is one kernel;
// scalar constants are cloned into the region (never region inputs).

func.func @chain(%x: tensor<4x8xf32>, %b: tensor<8xf32>, %c: tensor<4x1xf32>) -> tensor<4x8xf16> {
  %zero = tta.constant 0.000000e+00 : f32 -> f32
  %y = tta.add %x, %b : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  %z = tta.mul %y, %c : tensor<4x8xf32>, tensor<4x1xf32> -> tensor<4x8xf32>
  %p = tta.cmp "gt", %z, %zero : tensor<4x8xf32>, f32 -> tensor<4x8xi1>
  %e = tta.exp %z : tensor<4x8xf32>
  %r = tta.where %p, %z, %e : tensor<4x8xi1>, tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %h = tta.cast %r : tensor<4x8xf32> -> tensor<4x8xf16>
  func.return %h : tensor<4x8xf16>
}

// CHECK-LABEL: func.func @chain
// CHECK-NEXT:    %h = tta.fusion "elementwise"(%x, %b, %c) : (tensor<4x8xf32>, tensor<8xf32>, tensor<4x1xf32>) -> tensor<4x8xf16> {
// CHECK-NEXT:    ^bb0(%x_1: tensor<4x8xf32>, %b_1: tensor<8xf32>, %c_1: tensor<4x1xf32>):
// CHECK-NEXT:      %zero = tta.constant 0.000000e+00 : f32 -> f32
// CHECK-NEXT:      %y = tta.add %x_1, %b_1
// CHECK-NEXT:      %z = tta.mul %y, %c_1
// CHECK-NEXT:      %p = tta.cmp "gt", %z, %zero
// CHECK-NEXT:      %e = tta.exp %z
// CHECK-NEXT:      %r = tta.where %p, %z, %e
// CHECK-NEXT:      %h_1 = tta.cast %r
// CHECK-NEXT:      tta.yield %h_1 : tensor<4x8xf16>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %h

// Several results and an intermediate returned too: still one kernel with every escaping value.

func.func @multi_out(%x: tensor<64xf32>) -> (tensor<64xf32>, tensor<64xf32>) {
  %a = tta.abs %x : tensor<64xf32>
  %s = tta.sqrt %a : tensor<64xf32>
  %n = tta.neg %s : tensor<64xf32>
  func.return %s, %n : tensor<64xf32>, tensor<64xf32>
}

// CHECK-LABEL: func.func @multi_out
// CHECK-NEXT:    %s, %n = tta.fusion "elementwise"(%x) : (tensor<64xf32>) -> (tensor<64xf32>, tensor<64xf32>)
// CHECK-NOT:     tta.fusion
// CHECK:         func.return %s, %n

// Arrays of different shapes that broadcast together (an outer sum) are one kernel too.

func.func @outer(%a: tensor<5x1xf32>, %b: tensor<7xf32>) -> tensor<5x7xf32> {
  %e = tta.exp %a : tensor<5x1xf32>
  %y = tta.add %e, %b : tensor<5x1xf32>, tensor<7xf32> -> tensor<5x7xf32>
  func.return %y : tensor<5x7xf32>
}

// CHECK-LABEL: func.func @outer
// CHECK-NEXT:    %y = tta.fusion "elementwise"(%a, %b)
// CHECK-NOT:     tta.fusion

// A per-column value that is itself returned stays in its own kernel: inside the per-element kernel
// every row's programs would store it again.

func.func @no_redundant_stores(%x: tensor<64x8xf32>, %w: tensor<8xf32>) -> (tensor<64x8xf32>, tensor<8xf32>) {
  %w2 = tta.mul %w, %w : tensor<8xf32>, tensor<8xf32> -> tensor<8xf32>
  %y = tta.add %x, %w2 : tensor<64x8xf32>, tensor<8xf32> -> tensor<64x8xf32>
  func.return %y, %w2 : tensor<64x8xf32>, tensor<8xf32>
}

// CHECK-LABEL: func.func @no_redundant_stores
// CHECK-NEXT:    %w2 = tta.fusion "elementwise"(%w) : (tensor<8xf32>) -> tensor<8xf32>
// CHECK:         %y = tta.fusion "elementwise"(%x, %w2)
// CHECK:         func.return %y, %w2
