// RUN: tinyton-opt %s -p tinyton-fuse | filecheck %s

// GELU (tanh form) of a linear layer, as `0.5*h*(1 + tt.tanh(sqrt(2/pi)*(h + 0.044715*h**3)))` traces
// (`h**3` is two multiplications): the activation is the matmul's epilogue, one kernel.

func.func @gelu_tanh(%x: tensor<32x64xf32>, %w: tensor<48x64xf32>, %b: tensor<48xf32>) -> tensor<32x48xf32> {
  %wt = tta.transpose %w permutation = [1, 0] : tensor<48x64xf32> -> tensor<64x48xf32>
  %y = tta.matmul %x, %wt : tensor<32x64xf32>, tensor<64x48xf32> -> tensor<32x48xf32>
  %h = tta.add %y, %b : tensor<32x48xf32>, tensor<48xf32> -> tensor<32x48xf32>
  %half = tta.constant 5.000000e-01 : f32 -> f32
  %hh = tta.mul %half, %h : f32, tensor<32x48xf32> -> tensor<32x48xf32>
  %h2 = tta.mul %h, %h : tensor<32x48xf32>, tensor<32x48xf32> -> tensor<32x48xf32>
  %h3 = tta.mul %h, %h2 : tensor<32x48xf32>, tensor<32x48xf32> -> tensor<32x48xf32>
  %c = tta.constant 4.471500e-02 : f32 -> f32
  %ch3 = tta.mul %c, %h3 : f32, tensor<32x48xf32> -> tensor<32x48xf32>
  %inner = tta.add %h, %ch3 : tensor<32x48xf32>, tensor<32x48xf32> -> tensor<32x48xf32>
  %k = tta.constant 0.797884583 : f32 -> f32
  %arg = tta.mul %k, %inner : f32, tensor<32x48xf32> -> tensor<32x48xf32>
  %t = tta.tanh %arg : tensor<32x48xf32>
  %one = tta.constant 1.000000e+00 : f32 -> f32
  %t1 = tta.add %one, %t : f32, tensor<32x48xf32> -> tensor<32x48xf32>
  %r = tta.mul %hh, %t1 : tensor<32x48xf32>, tensor<32x48xf32> -> tensor<32x48xf32>
  func.return %r : tensor<32x48xf32>
}

// CHECK-LABEL: func.func @gelu_tanh
// CHECK-NEXT:    %r = tta.fusion "matmul_epilogue"(%w, %x, %b)
// CHECK:           %y = tta.matmul
// CHECK-NEXT:      %h = tta.add %y, %b_1
// CHECK:           %h3 = tta.mul %h, %h2
// CHECK:           %t = tta.tanh %arg
// CHECK:           %r_1 = tta.mul %hh, %t1
// CHECK-NEXT:      tta.yield %r_1
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %r
// CHECK-NOT:     tta.fusion

// SwiGLU: `sigmoid(x @ w1.T) * (x @ w1.T) * (x @ w3.T)`, two sibling matmuls of x and the gate in one kernel.

func.func @swiglu(%x: tensor<16x32xf32>, %w1: tensor<24x32xf32>, %w3: tensor<24x32xf32>) -> tensor<16x24xf32> {
  %w1t = tta.transpose %w1 permutation = [1, 0] : tensor<24x32xf32> -> tensor<32x24xf32>
  %a = tta.matmul %x, %w1t : tensor<16x32xf32>, tensor<32x24xf32> -> tensor<16x24xf32>
  %one = tta.constant 1.000000e+00 : f32 -> f32
  %na = tta.neg %a : tensor<16x24xf32>
  %e = tta.exp %na : tensor<16x24xf32>
  %d = tta.add %one, %e : f32, tensor<16x24xf32> -> tensor<16x24xf32>
  %s = tta.div %one, %d : f32, tensor<16x24xf32> -> tensor<16x24xf32>
  %g = tta.mul %s, %a : tensor<16x24xf32>, tensor<16x24xf32> -> tensor<16x24xf32>
  %w3t = tta.transpose %w3 permutation = [1, 0] : tensor<24x32xf32> -> tensor<32x24xf32>
  %u = tta.matmul %x, %w3t : tensor<16x32xf32>, tensor<32x24xf32> -> tensor<16x24xf32>
  %r = tta.mul %g, %u : tensor<16x24xf32>, tensor<16x24xf32> -> tensor<16x24xf32>
  func.return %r : tensor<16x24xf32>
}

// CHECK-LABEL: func.func @swiglu
// CHECK-NEXT:    %r = tta.fusion "matmul_epilogue"(%w1, %x, %w3)
// CHECK:           %a = tta.matmul
// CHECK:           %s = tta.div
// CHECK:           %u = tta.matmul
// CHECK-NEXT:      %r_1 = tta.mul %g, %u
// CHECK-NEXT:      tta.yield %r_1
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %r
// CHECK-NOT:     tta.fusion
