// Kernels the lowering rejects, with a message saying why.
// RUN: not tinyton-opt %s -p tinyton-to-llvm 2>&1 | filecheck %s
// RUN: not tinyton-opt %s -p 'tinyton-to-llvm{num_warps=3}' 2>&1 | filecheck %s --check-prefix=WARPS

// CHECK: tinyton-opt: error: tt.dot of 128x128 by 128x128 (operands staged in shared memory) needs 131072 bytes of shared memory, more than the 49152 bytes a kernel may use; use smaller tiles
// WARPS: tinyton-opt: error: num_warps must be 1, 2, 4, 8 or 16, got 3

builtin.module {
  func.func @big_dot(%a: !tt.ptr<f32>) {
    %x = tt.constant 1.0 : f32 -> tensor<128x128xf32>
    %d = tt.dot %x, %x, %x : tensor<128x128xf32>, tensor<128x128xf32> -> tensor<128x128xf32>
    %r = tt.reduce_sum %d axis = 0 : tensor<128x128xf32> -> tensor<128xf32>
    %s = tt.reduce_sum %r axis = 0 : tensor<128xf32> -> f32
    tt.store %a, %s : !tt.ptr<f32>, f32
    func.return
  }
}
