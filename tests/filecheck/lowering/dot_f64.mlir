// tt.dot of f64 tiles (NumPy's float64 matmul): the FMA path multiplies and accumulates in f64. It had
// loaded the operands as f32 and accumulated in f32 (the H200 gave x @ w of values near 1e-44 on float32's
// subnormal grid): no f32 may appear between the shared-memory loads and the store.
// REQUIRES: mlir-tools
// RUN: tinyton-opt %s -p tinyton-to-llvm | filecheck %s --check-prefix=LLVM
// RUN: tinyton-opt %s -p tinyton-to-llvm | mlir-translate --mlir-to-llvmir | llc -mtriple=nvptx64-nvidia-cuda -mcpu=sm_90 -mattr=+ptx80 | filecheck %s --check-prefix=PTX
// RUN: %if ptxas %{ tinyton-opt %s -p tinyton-to-llvm | mlir-translate --mlir-to-llvmir | llc -mtriple=nvptx64-nvidia-cuda -mcpu=sm_90 -mattr=+ptx80 -o %t.ptx && ptxas -arch=sm_90 %t.ptx -o %t.cubin %}

// LLVM:      nvvm.barrier0
// LLVM-NOT:  llvm.fptrunc
// LLVM:      llvm.load %{{.*}} : !llvm.ptr<3> -> f64
// LLVM-NOT:  llvm.fptrunc
// LLVM:      llvm.intr.fma(%{{.*}}, %{{.*}}, %{{.*}}) : (f64, f64, f64) -> f64
// LLVM-NOT:  f32

// PTX:       fma.rn.f64
// PTX-NOT:   .f32

builtin.module attributes {tt.num_warps = 1 : i32} {
  func.func @dot64(%a_ptr: !tt.ptr<f64> {tt.divisibility = 16 : i32}, %b_ptr: !tt.ptr<f64> {tt.divisibility = 16 : i32}, %c_ptr: !tt.ptr<f64> {tt.divisibility = 16 : i32}) {
    %0 = tt.arange 0 to 16 : tensor<16xi32>
    %1 = tt.expand_dims %0 axis = 1 : tensor<16xi32> -> tensor<16x1xi32>
    %2 = tt.constant 16 : i32 -> tensor<16x1xi32>
    %3 = tt.mul %1, %2 : tensor<16x1xi32>
    %4 = tt.expand_dims %0 axis = 0 : tensor<16xi32> -> tensor<1x16xi32>
    %5 = tt.broadcast %3 : tensor<16x1xi32> -> tensor<16x16xi32>
    %6 = tt.broadcast %4 : tensor<1x16xi32> -> tensor<16x16xi32>
    %7 = tt.add %5, %6 : tensor<16x16xi32>
    %8 = tt.splat %a_ptr : !tt.ptr<f64> -> tensor<16x16x!tt.ptr<f64>>
    %9 = tt.addptr %8, %7 : tensor<16x16x!tt.ptr<f64>>, tensor<16x16xi32>
    %10 = tt.load %9 : tensor<16x16x!tt.ptr<f64>> -> tensor<16x16xf64>
    %11 = tt.splat %b_ptr : !tt.ptr<f64> -> tensor<16x16x!tt.ptr<f64>>
    %12 = tt.addptr %11, %7 : tensor<16x16x!tt.ptr<f64>>, tensor<16x16xi32>
    %13 = tt.load %12 : tensor<16x16x!tt.ptr<f64>> -> tensor<16x16xf64>
    %14 = tt.constant 0.000000e+00 : f64 -> tensor<16x16xf64>
    %15 = tt.dot %10, %13, %14 : tensor<16x16xf64>, tensor<16x16xf64> -> tensor<16x16xf64>
    %16 = tt.splat %c_ptr : !tt.ptr<f64> -> tensor<16x16x!tt.ptr<f64>>
    %17 = tt.addptr %16, %7 : tensor<16x16x!tt.ptr<f64>>, tensor<16x16xi32>
    tt.store %17, %15 : tensor<16x16x!tt.ptr<f64>>, tensor<16x16xf64>
    func.return
  }
}
