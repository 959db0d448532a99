// Row sums of a 64x128 and of a 64x4 tile have different layouts: their product converts
// one through shared memory (store, barrier, load).
// REQUIRES: mlir-tools
// RUN: tinyton-opt %s -p tinyton-to-llvm | filecheck %s --check-prefix=LLVM
// RUN: %if ptxas %{ tinyton-opt %s -p tinyton-to-llvm | mlir-translate --mlir-to-llvmir | llc -mtriple=nvptx64-nvidia-cuda -mcpu=sm_90 -mattr=+ptx80 -o %t.ptx && ptxas -arch=sm_90 %t.ptx -o %t.cubin %}

// LLVM:      llvm.mlir.global internal @convert_smem() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<256 x i8>
// LLVM:      llvm.store
// LLVM:      nvvm.barrier0
// LLVM:      llvm.load

builtin.module attributes {tt.num_warps = 4 : i32} {
  func.func @convert(%x_ptr: !tt.ptr<f32> {tt.divisibility = 16 : i32}, %y_ptr: !tt.ptr<f32> {tt.divisibility = 16 : i32}, %o_ptr: !tt.ptr<f32> {tt.divisibility = 16 : i32}) {
    %0 = tt.arange 0 to 64 : tensor<64xi32>
    %1 = tt.expand_dims %0 axis = 1 : tensor<64xi32> -> tensor<64x1xi32>
    %2 = tt.constant 128 : i32 -> tensor<64x1xi32>
    %3 = tt.mul %1, %2 : tensor<64x1xi32>
    %4 = tt.splat %x_ptr : !tt.ptr<f32> -> tensor<64x1x!tt.ptr<f32>>
    %5 = tt.addptr %4, %3 : tensor<64x1x!tt.ptr<f32>>, tensor<64x1xi32>
    %6 = tt.arange 0 to 128 : tensor<128xi32>
    %7 = tt.expand_dims %6 axis = 0 : tensor<128xi32> -> tensor<1x128xi32>
    %8 = tt.broadcast %7 : tensor<1x128xi32> -> tensor<64x128xi32>
    %9 = tt.broadcast %5 : tensor<64x1x!tt.ptr<f32>> -> tensor<64x128x!tt.ptr<f32>>
    %10 = tt.addptr %9, %8 : tensor<64x128x!tt.ptr<f32>>, tensor<64x128xi32>
    %11 = tt.load %10 : tensor<64x128x!tt.ptr<f32>> -> tensor<64x128xf32>
    %12 = tt.reduce_sum %11 axis = 1 : tensor<64x128xf32> -> tensor<64xf32>
    %13 = tt.constant 4 : i32 -> tensor<64x1xi32>
    %14 = tt.mul %1, %13 : tensor<64x1xi32>
    %15 = tt.splat %y_ptr : !tt.ptr<f32> -> tensor<64x1x!tt.ptr<f32>>
    %16 = tt.addptr %15, %14 : tensor<64x1x!tt.ptr<f32>>, tensor<64x1xi32>
    %17 = tt.arange 0 to 4 : tensor<4xi32>
    %18 = tt.expand_dims %17 axis = 0 : tensor<4xi32> -> tensor<1x4xi32>
    %19 = tt.broadcast %18 : tensor<1x4xi32> -> tensor<64x4xi32>
    %20 = tt.broadcast %16 : tensor<64x1x!tt.ptr<f32>> -> tensor<64x4x!tt.ptr<f32>>
    %21 = tt.addptr %20, %19 : tensor<64x4x!tt.ptr<f32>>, tensor<64x4xi32>
    %22 = tt.load %21 : tensor<64x4x!tt.ptr<f32>> -> tensor<64x4xf32>
    %23 = tt.reduce_max %22 axis = 1 : tensor<64x4xf32> -> tensor<64xf32>
    %24 = tt.splat %o_ptr : !tt.ptr<f32> -> tensor<64x!tt.ptr<f32>>
    %25 = tt.addptr %24, %0 : tensor<64x!tt.ptr<f32>>, tensor<64xi32>
    %26 = tt.mul %12, %23 : tensor<64xf32>
    tt.store %25, %26 : tensor<64x!tt.ptr<f32>>, tensor<64xf32>
    func.return
  }
}
