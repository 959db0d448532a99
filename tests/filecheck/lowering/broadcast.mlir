// Outer product a[:, None] * b[None, :] + 1: both loads are built in the layouts that the
// 2-D broadcast reuses registers from, and the index tiles are rematerialised in them:
// no shared memory at all.
// REQUIRES: mlir-tools
// RUN: tinyton-opt %s -p tinyton-to-llvm | filecheck %s --check-prefix=LLVM
// RUN: tinyton-opt %s -p tinyton-to-llvm | mlir-translate --mlir-to-llvmir | llc -mtriple=nvptx64-nvidia-cuda -mcpu=sm_90 -mattr=+ptx80 | filecheck %s --check-prefix=PTX
// RUN: %if ptxas %{ tinyton-opt %s -p tinyton-to-llvm | mlir-translate --mlir-to-llvmir | llc -mtriple=nvptx64-nvidia-cuda -mcpu=sm_90 -mattr=+ptx80 -o %t.ptx && ptxas -arch=sm_90 %t.ptx -o %t.cubin %}

// LLVM-NOT:  llvm.mlir.global
// LLVM-NOT:  nvvm.barrier0

// PTX:       ld.global.v4.b32
// PTX-COUNT-4: st.global.v4.b32
// PTX-NOT:   .shared

builtin.module attributes {tt.num_warps = 4 : i32} {
  func.func @outer(%a_ptr: !tt.ptr<f32> {tt.divisibility = 16 : i32}, %b_ptr: !tt.ptr<f32> {tt.divisibility = 16 : i32}, %c_ptr: !tt.ptr<f32> {tt.divisibility = 16 : i32}) {
    %0 = tt.arange 0 to 64 : tensor<64xi32>
    %1 = tt.arange 0 to 32 : tensor<32xi32>
    %2 = tt.splat %a_ptr : !tt.ptr<f32> -> tensor<64x!tt.ptr<f32>>
    %3 = tt.addptr %2, %0 : tensor<64x!tt.ptr<f32>>, tensor<64xi32>
    %4 = tt.load %3 : tensor<64x!tt.ptr<f32>> -> tensor<64xf32>
    %5 = tt.splat %b_ptr : !tt.ptr<f32> -> tensor<32x!tt.ptr<f32>>
    %6 = tt.addptr %5, %1 : tensor<32x!tt.ptr<f32>>, tensor<32xi32>
    %7 = tt.load %6 : tensor<32x!tt.ptr<f32>> -> tensor<32xf32>
    %8 = tt.expand_dims %0 axis = 1 : tensor<64xi32> -> tensor<64x1xi32>
    %9 = tt.constant 32 : i32 -> tensor<64x1xi32>
    %10 = tt.mul %8, %9 : tensor<64x1xi32>
    %11 = tt.splat %c_ptr : !tt.ptr<f32> -> tensor<64x1x!tt.ptr<f32>>
    %12 = tt.addptr %11, %10 : tensor<64x1x!tt.ptr<f32>>, tensor<64x1xi32>
    %13 = tt.expand_dims %1 axis = 0 : tensor<32xi32> -> tensor<1x32xi32>
    %14 = tt.broadcast %13 : tensor<1x32xi32> -> tensor<64x32xi32>
    %15 = tt.broadcast %12 : tensor<64x1x!tt.ptr<f32>> -> tensor<64x32x!tt.ptr<f32>>
    %16 = tt.addptr %15, %14 : tensor<64x32x!tt.ptr<f32>>, tensor<64x32xi32>
    %17 = tt.expand_dims %4 axis = 1 : tensor<64xf32> -> tensor<64x1xf32>
    %18 = tt.expand_dims %7 axis = 0 : tensor<32xf32> -> tensor<1x32xf32>
    %19 = tt.broadcast %17 : tensor<64x1xf32> -> tensor<64x32xf32>
    %20 = tt.broadcast %18 : tensor<1x32xf32> -> tensor<64x32xf32>
    %21 = tt.mul %19, %20 : tensor<64x32xf32>
    %22 = tt.constant 1.000000e+00 : f32 -> tensor<64x32xf32>
    %23 = tt.add %21, %22 : tensor<64x32xf32>
    tt.store %16, %23 : tensor<64x32x!tt.ptr<f32>>, tensor<64x32xf32>
    func.return
  }
}
