// RUN: tinyton-opt %s -p tinyton-fuse | filecheck %s

// relu(x @ w.T + b): the transpose is a view (strided loads of w), bias and relu are the epilogue.

func.func @linear_relu(%x: tensor<32x64xf32>, %w: tensor<48x64xf32>, %b: tensor<48xf32>) -> tensor<32x48xf32> {
  %wt = tta.transpose %w permutation = [1, 0] : tensor<48x64xf32> -> tensor<64x48xf32>
  %y = tta.matmul %x, %wt : tensor<32x64xf32>, tensor<64x48xf32> -> tensor<32x48xf32>
  %z = tta.add %y, %b : tensor<32x48xf32>, tensor<48xf32> -> tensor<32x48xf32>
  %zero = tta.constant 0.000000e+00 : f32 -> f32
  %r = tta.maximum %z, %zero : tensor<32x48xf32>, f32 -> tensor<32x48xf32>
  func.return %r : tensor<32x48xf32>
}

// CHECK-LABEL: func.func @linear_relu
// CHECK-NEXT:    %r = tta.fusion "matmul_epilogue"(%w, %x, %b) : (tensor<48x64xf32>, tensor<32x64xf32>, tensor<48xf32>) -> tensor<32x48xf32> {
// CHECK-NEXT:    ^bb0(%w_1: tensor<48x64xf32>, %x_1: tensor<32x64xf32>, %b_1: tensor<48xf32>):
// CHECK-NEXT:      %zero = tta.constant 0.000000e+00
// CHECK-NEXT:      %wt = tta.transpose %w_1
// CHECK-NEXT:      %y = tta.matmul %x_1, %wt
// CHECK-NEXT:      %z = tta.add %y, %b_1
// CHECK-NEXT:      %r_1 = tta.maximum %z, %zero
// CHECK-NEXT:      tta.yield %r_1
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %r

// A matmul takes no prologue and no reduction: the softmax of attention scores is its own kernel.

func.func @scores_softmax(%q: tensor<16x32xf32>, %k: tensor<32x16xf32>) -> tensor<16x16xf32> {
  %s = tta.matmul %q, %k : tensor<16x32xf32>, tensor<32x16xf32> -> tensor<16x16xf32>
  %m = tta.reduce_max %s axis = 1 keepdims : tensor<16x16xf32> -> tensor<16x1xf32>
  %d = tta.sub %s, %m : tensor<16x16xf32>, tensor<16x1xf32> -> tensor<16x16xf32>
  %e = tta.exp %d : tensor<16x16xf32>
  %z = tta.reduce_sum %e axis = 1 keepdims : tensor<16x16xf32> -> tensor<16x1xf32>
  %p = tta.div %e, %z : tensor<16x16xf32>, tensor<16x1xf32> -> tensor<16x16xf32>
  func.return %p : tensor<16x16xf32>
}

// CHECK-LABEL: func.func @scores_softmax
// CHECK-NEXT:    %s = tta.fusion "matmul_epilogue"(%q, %k)
// CHECK:         %p = tta.fusion "softmax"(%s)
// CHECK-NOT:     tta.fusion

// Sibling matmuls (q, k, v projections of one input, one output shape): one kernel, one K loop each over
// the same output tile; each result keeps its own epilogue.

func.func @qkv(%x: tensor<8x16xf32>, %wq: tensor<16x16xf32>, %wk: tensor<16x16xf32>, %wv: tensor<16x16xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>) {
  %q = tta.matmul %x, %wq : tensor<8x16xf32>, tensor<16x16xf32> -> tensor<8x16xf32>
  %k = tta.matmul %x, %wk : tensor<8x16xf32>, tensor<16x16xf32> -> tensor<8x16xf32>
  %v = tta.matmul %x, %wv : tensor<8x16xf32>, tensor<16x16xf32> -> tensor<8x16xf32>
  %two = tta.constant 2.000000e+00 : f32 -> f32
  %q2 = tta.mul %q, %two : tensor<8x16xf32>, f32 -> tensor<8x16xf32>
  func.return %q2, %k, %v : tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>
}

// CHECK-LABEL: func.func @qkv
// CHECK-NEXT:    %k, %v, %q2 = tta.fusion "matmul_epilogue"(%x, %wq, %wk, %wv)
// CHECK:           %q = tta.matmul
// CHECK-NEXT:      %k_1 = tta.matmul
// CHECK-NEXT:      %v_1 = tta.matmul
// CHECK-NEXT:      %q2_1 = tta.mul %q,
// CHECK-NEXT:      tta.yield
// CHECK-NEXT:    }
// CHECK-NOT:     tta.fusion

// Matmuls that share no operand, or whose outputs differ in shape, stay apart.

func.func @not_siblings(%x: tensor<8x16xf32>, %y: tensor<8x16xf32>, %w: tensor<16x16xf32>, %u: tensor<16x16xf32>, %n: tensor<16x32xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x32xf32>) {
  %a = tta.matmul %x, %w : tensor<8x16xf32>, tensor<16x16xf32> -> tensor<8x16xf32>
  %b = tta.matmul %y, %u : tensor<8x16xf32>, tensor<16x16xf32> -> tensor<8x16xf32>
  %c = tta.matmul %x, %n : tensor<8x16xf32>, tensor<16x32xf32> -> tensor<8x32xf32>
  func.return %a, %b, %c : tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x32xf32>
}

// CHECK-LABEL: func.func @not_siblings
// CHECK-NEXT:    %a = tta.fusion "matmul_epilogue"(%x, %w)
// CHECK:         %b = tta.fusion "matmul_epilogue"(%y, %u)
// CHECK:         %c = tta.fusion "matmul_epilogue"(%x, %n)
