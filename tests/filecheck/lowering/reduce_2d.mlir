// A 32x64 tile: row sums (+ a bias loaded straight into the sums' layout), column maxima,
// and x - rowmean broadcast back by register reuse. Warps split the rows, so only the
// column reduction crosses warps: its partials are the only use of shared memory.
// REQUIRES: mlir-tools
// RUN: tinyton-opt %s -p tinyton-to-llvm | filecheck %s --check-prefix=LLVM
// RUN: tinyton-opt %s -p tinyton-to-llvm | mlir-translate --mlir-to-llvmir | llc -mtriple=nvptx64-nvidia-cuda -mcpu=sm_90 -mattr=+ptx80 | filecheck %s --check-prefix=PTX
// RUN: %if ptxas %{ tinyton-opt %s -p tinyton-to-llvm | mlir-translate --mlir-to-llvmir | llc -mtriple=nvptx64-nvidia-cuda -mcpu=sm_90 -mattr=+ptx80 -o %t.ptx && ptxas -arch=sm_90 %t.ptx -o %t.cubin %}

// LLVM:      llvm.mlir.global internal @reduce2d_smem() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<1024 x i8>
// LLVM-COUNT-20: nvvm.shfl.sync bfly
// LLVM:      nvvm.barrier0
// LLVM-NOT:  nvvm.barrier0

// PTX-COUNT-4: ld.global.v4.b32
// PTX:       st.shared.v4.b32
// PTX:       bar.sync 0;
// PTX:       ld.shared.v4.b32
// PTX-NOT:   bar.sync
// PTX-COUNT-5: st.global.v4.b32

builtin.module attributes {tt.num_warps = 4 : i32} {
  func.func @reduce2d(%x_ptr: !tt.ptr<f32> {tt.divisibility = 16 : i32}, %bias_ptr: !tt.ptr<f32> {tt.divisibility = 16 : i32}, %rows_out: !tt.ptr<f32> {tt.divisibility = 16 : i32}, %cols_out: !tt.ptr<f32> {tt.divisibility = 16 : i32}, %centered: !tt.ptr<f32> {tt.divisibility = 16 : i32}) {
    %0 = tt.program_id 0 : i32
    %1 = tt.arange 0 to 32 : tensor<32xi32>
    %2 = tt.arange 0 to 64 : tensor<64xi32>
    %3 = tt.constant 2048 : i32 -> i32
    %4 = tt.mul %0, %3 : i32
    %5 = tt.expand_dims %1 axis = 1 : tensor<32xi32> -> tensor<32x1xi32>
    %6 = tt.constant 64 : i32 -> tensor<32x1xi32>
    %7 = tt.mul %5, %6 : tensor<32x1xi32>
    %8 = tt.splat %4 : i32 -> tensor<32x1xi32>
    %9 = tt.add %8, %7 : tensor<32x1xi32>
    %10 = tt.expand_dims %2 axis = 0 : tensor<64xi32> -> tensor<1x64xi32>
    %11 = tt.broadcast %9 : tensor<32x1xi32> -> tensor<32x64xi32>
    %12 = tt.broadcast %10 : tensor<1x64xi32> -> tensor<32x64xi32>
    %13 = tt.add %11, %12 : tensor<32x64xi32>
    %14 = tt.splat %x_ptr : !tt.ptr<f32> -> tensor<32x64x!tt.ptr<f32>>
    %15 = tt.addptr %14, %13 : tensor<32x64x!tt.ptr<f32>>, tensor<32x64xi32>
    %16 = tt.load %15 : tensor<32x64x!tt.ptr<f32>> -> tensor<32x64xf32>
    %17 = tt.reduce_sum %16 axis = 1 : tensor<32x64xf32> -> tensor<32xf32>
    %18 = tt.constant 32 : i32 -> i32
    %19 = tt.mul %0, %18 : i32
    %20 = tt.addptr %rows_out, %19 : !tt.ptr<f32>, i32
    %21 = tt.splat %20 : !tt.ptr<f32> -> tensor<32x!tt.ptr<f32>>
    %22 = tt.addptr %21, %1 : tensor<32x!tt.ptr<f32>>, tensor<32xi32>
    %23 = tt.addptr %bias_ptr, %19 : !tt.ptr<f32>, i32
    %24 = tt.splat %23 : !tt.ptr<f32> -> tensor<32x!tt.ptr<f32>>
    %25 = tt.addptr %24, %1 : tensor<32x!tt.ptr<f32>>, tensor<32xi32>
    %26 = tt.load %25 : tensor<32x!tt.ptr<f32>> -> tensor<32xf32>
    %27 = tt.add %17, %26 : tensor<32xf32>
    tt.store %22, %27 : tensor<32x!tt.ptr<f32>>, tensor<32xf32>
    %28 = tt.constant 64 : i32 -> i32
    %29 = tt.mul %0, %28 : i32
    %30 = tt.addptr %cols_out, %29 : !tt.ptr<f32>, i32
    %31 = tt.splat %30 : !tt.ptr<f32> -> tensor<64x!tt.ptr<f32>>
    %32 = tt.addptr %31, %2 : tensor<64x!tt.ptr<f32>>, tensor<64xi32>
    %33 = tt.reduce_max %16 axis = 0 : tensor<32x64xf32> -> tensor<64xf32>
    tt.store %32, %33 : tensor<64x!tt.ptr<f32>>, tensor<64xf32>
    %34 = tt.splat %centered : !tt.ptr<f32> -> tensor<32x64x!tt.ptr<f32>>
    %35 = tt.addptr %34, %13 : tensor<32x64x!tt.ptr<f32>>, tensor<32x64xi32>
    %36 = tt.constant 1.562500e-02 : f32 -> tensor<32xf32>
    %37 = tt.mul %17, %36 : tensor<32xf32>
    %38 = tt.expand_dims %37 axis = 1 : tensor<32xf32> -> tensor<32x1xf32>
    %39 = tt.broadcast %38 : tensor<32x1xf32> -> tensor<32x64xf32>
    %40 = tt.sub %16, %39 : tensor<32x64xf32>
    tt.store %35, %40 : tensor<32x64x!tt.ptr<f32>>, tensor<32x64xf32>
    func.return
  }
}
