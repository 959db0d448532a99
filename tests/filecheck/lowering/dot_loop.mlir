// tt.dot inside an scf.for over K (masked edges): operands through shared memory, 4 steps
// of K per iteration of the FMA loop (128 FMAs for 32 accumulators per thread), the
// accumulators carried as block arguments of both loops.
// REQUIRES: mlir-tools
// RUN: tinyton-opt %s -p tinyton-to-llvm | filecheck %s --check-prefix=LLVM
// RUN: tinyton-opt %s -p tinyton-to-llvm | mlir-translate --mlir-to-llvmir | llc -mtriple=nvptx64-nvidia-cuda -mcpu=sm_90 -mattr=+ptx80 | filecheck %s --check-prefix=PTX
// RUN: %if ptxas %{ tinyton-opt %s -p tinyton-to-llvm | mlir-translate --mlir-to-llvmir | llc -mtriple=nvptx64-nvidia-cuda -mcpu=sm_90 -mattr=+ptx80 -o %t.ptx && ptxas -arch=sm_90 %t.ptx -o %t.cubin %}

// LLVM:      llvm.mlir.global internal @matmul_smem() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<8192 x i8>
// LLVM:      ^bb1(%{{[0-9]+}}: i32{{(, %[0-9]+: f32)+}}):
// LLVM:      nvvm.barrier0
// LLVM:      nvvm.barrier0
// LLVM-COUNT-128: llvm.intr.fma

// PTX:       st.shared.v4.b32
// PTX:       bar.sync 0;
// PTX:       ld.shared.v4.b32
// PTX-COUNT-128: fma.rn.f32

builtin.module attributes {tt.num_warps = 4 : i32} {
  func.func @matmul(%a_ptr: !tt.ptr<f32> {tt.divisibility = 16 : i32}, %b_ptr: !tt.ptr<f32> {tt.divisibility = 16 : i32}, %c_ptr: !tt.ptr<f32> {tt.divisibility = 16 : i32}, %M: i32, %N: i32, %K: i32) {
    %0 = tt.program_id 0 : i32
    %1 = tt.program_id 1 : i32
    %2 = tt.constant 64 : i32 -> i32
    %3 = tt.mul %0, %2 : i32
    %4 = tt.arange 0 to 64 : tensor<64xi32>
    %5 = tt.splat %3 : i32 -> tensor<64xi32>
    %6 = tt.add %5, %4 : tensor<64xi32>
    %7 = tt.mul %1, %2 : i32
    %8 = tt.splat %7 : i32 -> tensor<64xi32>
    %9 = tt.add %8, %4 : tensor<64xi32>
    %10 = tt.constant 0.000000e+00 : f32 -> tensor<64x64xf32>
    %11 = tt.constant 0 : i32 -> i32
    %12 = tt.constant 16 : i32 -> i32
    %13 = scf.for %14 = %11 to %K step %12 iter_args(%15 = %10) -> (tensor<64x64xf32>) : i32 {
      %16 = tt.arange 0 to 16 : tensor<16xi32>
      %17 = tt.splat %14 : i32 -> tensor<16xi32>
      %18 = tt.add %17, %16 : tensor<16xi32>
      %19 = tt.expand_dims %6 axis = 1 : tensor<64xi32> -> tensor<64x1xi32>
      %20 = tt.splat %K : i32 -> tensor<64x1xi32>
      %21 = tt.mul %19, %20 : tensor<64x1xi32>
      %22 = tt.splat %a_ptr : !tt.ptr<f32> -> tensor<64x1x!tt.ptr<f32>>
      %23 = tt.addptr %22, %21 : tensor<64x1x!tt.ptr<f32>>, tensor<64x1xi32>
      %24 = tt.expand_dims %18 axis = 0 : tensor<16xi32> -> tensor<1x16xi32>
      %25 = tt.broadcast %24 : tensor<1x16xi32> -> tensor<64x16xi32>
      %26 = tt.broadcast %23 : tensor<64x1x!tt.ptr<f32>> -> tensor<64x16x!tt.ptr<f32>>
      %27 = tt.addptr %26, %25 : tensor<64x16x!tt.ptr<f32>>, tensor<64x16xi32>
      %28 = tt.splat %M : i32 -> tensor<64x1xi32>
      %29 = tt.cmp "lt", %19, %28 : tensor<64x1xi32> -> tensor<64x1xi1>
      %30 = tt.splat %K : i32 -> tensor<1x16xi32>
      %31 = tt.cmp "lt", %24, %30 : tensor<1x16xi32> -> tensor<1x16xi1>
      %32 = tt.broadcast %29 : tensor<64x1xi1> -> tensor<64x16xi1>
      %33 = tt.broadcast %31 : tensor<1x16xi1> -> tensor<64x16xi1>
      %34 = tt.and %32, %33 : tensor<64x16xi1>
      %35 = tt.constant 0.000000e+00 : f32 -> tensor<64x16xf32>
      %36 = tt.load %27 mask %34 other %35 : tensor<64x16x!tt.ptr<f32>>, tensor<64x16xi1>, tensor<64x16xf32> -> tensor<64x16xf32>
      %37 = tt.expand_dims %18 axis = 1 : tensor<16xi32> -> tensor<16x1xi32>
      %38 = tt.splat %N : i32 -> tensor<16x1xi32>
      %39 = tt.mul %37, %38 : tensor<16x1xi32>
      %40 = tt.splat %b_ptr : !tt.ptr<f32> -> tensor<16x1x!tt.ptr<f32>>
      %41 = tt.addptr %40, %39 : tensor<16x1x!tt.ptr<f32>>, tensor<16x1xi32>
      %42 = tt.expand_dims %9 axis = 0 : tensor<64xi32> -> tensor<1x64xi32>
      %43 = tt.broadcast %42 : tensor<1x64xi32> -> tensor<16x64xi32>
      %44 = tt.broadcast %41 : tensor<16x1x!tt.ptr<f32>> -> tensor<16x64x!tt.ptr<f32>>
      %45 = tt.addptr %44, %43 : tensor<16x64x!tt.ptr<f32>>, tensor<16x64xi32>
      %46 = tt.splat %K : i32 -> tensor<16x1xi32>
      %47 = tt.cmp "lt", %37, %46 : tensor<16x1xi32> -> tensor<16x1xi1>
      %48 = tt.splat %N : i32 -> tensor<1x64xi32>
      %49 = tt.cmp "lt", %42, %48 : tensor<1x64xi32> -> tensor<1x64xi1>
      %50 = tt.broadcast %47 : tensor<16x1xi1> -> tensor<16x64xi1>
      %51 = tt.broadcast %49 : tensor<1x64xi1> -> tensor<16x64xi1>
      %52 = tt.and %50, %51 : tensor<16x64xi1>
      %53 = tt.constant 0.000000e+00 : f32 -> tensor<16x64xf32>
      %54 = tt.load %45 mask %52 other %53 : tensor<16x64x!tt.ptr<f32>>, tensor<16x64xi1>, tensor<16x64xf32> -> tensor<16x64xf32>
      %55 = tt.dot %36, %54, %15 : tensor<64x16xf32>, tensor<16x64xf32> -> tensor<64x64xf32>
      scf.yield %55 : tensor<64x64xf32>
    }
    %56 = tt.expand_dims %6 axis = 1 : tensor<64xi32> -> tensor<64x1xi32>
    %57 = tt.splat %N : i32 -> tensor<64x1xi32>
    %58 = tt.mul %56, %57 : tensor<64x1xi32>
    %59 = tt.splat %c_ptr : !tt.ptr<f32> -> tensor<64x1x!tt.ptr<f32>>
    %60 = tt.addptr %59, %58 : tensor<64x1x!tt.ptr<f32>>, tensor<64x1xi32>
    %61 = tt.expand_dims %9 axis = 0 : tensor<64xi32> -> tensor<1x64xi32>
    %62 = tt.broadcast %61 : tensor<1x64xi32> -> tensor<64x64xi32>
    %63 = tt.broadcast %60 : tensor<64x1x!tt.ptr<f32>> -> tensor<64x64x!tt.ptr<f32>>
    %64 = tt.addptr %63, %62 : tensor<64x64x!tt.ptr<f32>>, tensor<64x64xi32>
    %65 = tt.splat %M : i32 -> tensor<64x1xi32>
    %66 = tt.cmp "lt", %56, %65 : tensor<64x1xi32> -> tensor<64x1xi1>
    %67 = tt.splat %N : i32 -> tensor<1x64xi32>
    %68 = tt.cmp "lt", %61, %67 : tensor<1x64xi32> -> tensor<1x64xi1>
    %69 = tt.broadcast %66 : tensor<64x1xi1> -> tensor<64x64xi1>
    %70 = tt.broadcast %68 : tensor<1x64xi1> -> tensor<64x64xi1>
    %71 = tt.and %69, %70 : tensor<64x64xi1>
    tt.store %64, %13 mask %71 : tensor<64x64x!tt.ptr<f32>>, tensor<64x64xf32>, tensor<64x64xi1>
    func.return
  }
}
