// A dot starting from a loaded row broadcast over its rows (a bias, the attention backward's -delta): the row is
// loaded in the slice of the accumulator's layout each thread holds, so the only shared memory is the operands'
// tiles (2 KB) and the only barrier theirs; it had been loaded in a blocked layout and converted through shared
// memory (6 KB, a second barrier).
// REQUIRES: mlir-tools
// RUN: tinyton-opt %s -p tinyton-to-llvm | filecheck %s --check-prefix=LLVM
// RUN: %if ptxas %{ tinyton-opt %s -p tinyton-to-llvm | mlir-translate --mlir-to-llvmir | llc -mtriple=nvptx64-nvidia-cuda -mcpu=sm_80 -mattr=+ptx80 -o %t.ptx && ptxas -arch=sm_80 %t.ptx -o %t.cubin %}

// LLVM:      llvm.mlir.global internal @biased_dot_smem() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<2048 x i8>
// LLVM-COUNT-1: nvvm.barrier0
// LLVM-NOT:  nvvm.barrier0
// LLVM-COUNT-2: llvm.call_intrinsic "llvm.nvvm.mma.m16n8k16.row.col.f32.f32"

builtin.module attributes {tt.num_warps = 4 : i32} {
  func.func @biased_dot(%a_ptr: !tt.ptr<f16> {tt.divisibility = 16 : i32}, %b_ptr: !tt.ptr<f16> {tt.divisibility = 16 : i32}, %bias_ptr: !tt.ptr<f32> {tt.divisibility = 16 : i32}, %c_ptr: !tt.ptr<f32> {tt.divisibility = 16 : i32}) {
    %0 = tt.arange 0 to 32 : tensor<32xi32>
    %1 = tt.arange 0 to 16 : tensor<16xi32>
    %2 = tt.expand_dims %0 axis = 1 : tensor<32xi32> -> tensor<32x1xi32>
    %3 = tt.constant 16 : i32 -> tensor<32x1xi32>
    %4 = tt.mul %2, %3 : tensor<32x1xi32>
    %5 = tt.splat %a_ptr : !tt.ptr<f16> -> tensor<32x1x!tt.ptr<f16>>
    %6 = tt.addptr %5, %4 : tensor<32x1x!tt.ptr<f16>>, tensor<32x1xi32>
    %7 = tt.expand_dims %1 axis = 0 : tensor<16xi32> -> tensor<1x16xi32>
    %8 = tt.broadcast %7 : tensor<1x16xi32> -> tensor<32x16xi32>
    %9 = tt.broadcast %6 : tensor<32x1x!tt.ptr<f16>> -> tensor<32x16x!tt.ptr<f16>>
    %10 = tt.addptr %9, %8 : tensor<32x16x!tt.ptr<f16>>, tensor<32x16xi32>
    %11 = tt.load %10 : tensor<32x16x!tt.ptr<f16>> -> tensor<32x16xf16>
    %12 = tt.expand_dims %1 axis = 1 : tensor<16xi32> -> tensor<16x1xi32>
    %13 = tt.constant 32 : i32 -> tensor<16x1xi32>
    %14 = tt.mul %12, %13 : tensor<16x1xi32>
    %15 = tt.splat %b_ptr : !tt.ptr<f16> -> tensor<16x1x!tt.ptr<f16>>
    %16 = tt.addptr %15, %14 : tensor<16x1x!tt.ptr<f16>>, tensor<16x1xi32>
    %17 = tt.expand_dims %0 axis = 0 : tensor<32xi32> -> tensor<1x32xi32>
    %18 = tt.broadcast %17 : tensor<1x32xi32> -> tensor<16x32xi32>
    %19 = tt.broadcast %16 : tensor<16x1x!tt.ptr<f16>> -> tensor<16x32x!tt.ptr<f16>>
    %20 = tt.addptr %19, %18 : tensor<16x32x!tt.ptr<f16>>, tensor<16x32xi32>
    %21 = tt.load %20 : tensor<16x32x!tt.ptr<f16>> -> tensor<16x32xf16>
    %22 = tt.splat %bias_ptr : !tt.ptr<f32> -> tensor<1x32x!tt.ptr<f32>>
    %23 = tt.addptr %22, %17 : tensor<1x32x!tt.ptr<f32>>, tensor<1x32xi32>
    %24 = tt.load %23 : tensor<1x32x!tt.ptr<f32>> -> tensor<1x32xf32>
    %25 = tt.broadcast %24 : tensor<1x32xf32> -> tensor<32x32xf32>
    %26 = tt.dot %11, %21, %25 : tensor<32x16xf16>, tensor<16x32xf16> -> tensor<32x32xf32>
    %27 = tt.constant 32 : i32 -> tensor<32x1xi32>
    %28 = tt.mul %2, %27 : tensor<32x1xi32>
    %29 = tt.splat %c_ptr : !tt.ptr<f32> -> tensor<32x1x!tt.ptr<f32>>
    %30 = tt.addptr %29, %28 : tensor<32x1x!tt.ptr<f32>>, tensor<32x1xi32>
    %31 = tt.broadcast %17 : tensor<1x32xi32> -> tensor<32x32xi32>
    %32 = tt.broadcast %30 : tensor<32x1x!tt.ptr<f32>> -> tensor<32x32x!tt.ptr<f32>>
    %33 = tt.addptr %32, %31 : tensor<32x32x!tt.ptr<f32>>, tensor<32x32xi32>
    tt.store %33, %26 : tensor<32x32x!tt.ptr<f32>>, tensor<32x32xf32>
    func.return
  }
}
