// Casts among f16, f32, i32 and i1; f16 exp computes in f32.
// REQUIRES: mlir-tools
// RUN: tinyton-opt %s -p tinyton-to-llvm | mlir-translate --mlir-to-llvmir | llc -mtriple=nvptx64-nvidia-cuda -mcpu=sm_90 -mattr=+ptx80 | filecheck %s --check-prefix=PTX
// RUN: %if ptxas %{ tinyton-opt %s -p tinyton-to-llvm | mlir-translate --mlir-to-llvmir | llc -mtriple=nvptx64-nvidia-cuda -mcpu=sm_90 -mattr=+ptx80 -o %t.ptx && ptxas -arch=sm_90 %t.ptx -o %t.cubin %}

// PTX-DAG:   cvt.f32.f16
// PTX-DAG:   cvt.rn.f16.f32
// PTX-DAG:   cvt.rn.f32.s32
// PTX-DAG:   cvt.rzi.s32.f32
// PTX-DAG:   ex2.approx.f32
// PTX-DAG:   ld.global.v2.b32
// PTX-DAG:   st.global.v2.b32

builtin.module attributes {tt.num_warps = 4 : i32} {
  func.func @casts(%h_ptr: !tt.ptr<f16> {tt.divisibility = 16 : i32}, %f_ptr: !tt.ptr<f32> {tt.divisibility = 16 : i32}, %i_ptr: !tt.ptr<i32> {tt.divisibility = 16 : i32}, %out_h: !tt.ptr<f16> {tt.divisibility = 16 : i32}, %out_f: !tt.ptr<f32> {tt.divisibility = 16 : i32}, %out_i: !tt.ptr<i32> {tt.divisibility = 16 : i32}, %out_b: !tt.ptr<f32> {tt.divisibility = 16 : i32}) {
    %0 = tt.arange 0 to 512 : tensor<512xi32>
    %1 = tt.splat %h_ptr : !tt.ptr<f16> -> tensor<512x!tt.ptr<f16>>
    %2 = tt.addptr %1, %0 : tensor<512x!tt.ptr<f16>>, tensor<512xi32>
    %3 = tt.load %2 : tensor<512x!tt.ptr<f16>> -> tensor<512xf16>
    %4 = tt.splat %f_ptr : !tt.ptr<f32> -> tensor<512x!tt.ptr<f32>>
    %5 = tt.addptr %4, %0 : tensor<512x!tt.ptr<f32>>, tensor<512xi32>
    %6 = tt.load %5 : tensor<512x!tt.ptr<f32>> -> tensor<512xf32>
    %7 = tt.splat %i_ptr : !tt.ptr<i32> -> tensor<512x!tt.ptr<i32>>
    %8 = tt.addptr %7, %0 : tensor<512x!tt.ptr<i32>>, tensor<512xi32>
    %9 = tt.load %8 : tensor<512x!tt.ptr<i32>> -> tensor<512xi32>
    %10 = tt.splat %out_h : !tt.ptr<f16> -> tensor<512x!tt.ptr<f16>>
    %11 = tt.addptr %10, %0 : tensor<512x!tt.ptr<f16>>, tensor<512xi32>
    %12 = tt.cast %3 : tensor<512xf16> -> tensor<512xf32>
    %13 = tt.constant 2.000000e+00 : f32 -> tensor<512xf32>
    %14 = tt.mul %12, %13 : tensor<512xf32>
    %15 = tt.add %14, %6 : tensor<512xf32>
    %16 = tt.cast %15 : tensor<512xf32> -> tensor<512xf16>
    tt.store %11, %16 : tensor<512x!tt.ptr<f16>>, tensor<512xf16>
    %17 = tt.splat %out_f : !tt.ptr<f32> -> tensor<512x!tt.ptr<f32>>
    %18 = tt.addptr %17, %0 : tensor<512x!tt.ptr<f32>>, tensor<512xi32>
    %19 = tt.exp %3 : tensor<512xf16>
    %20 = tt.cast %19 : tensor<512xf16> -> tensor<512xf32>
    %21 = tt.cast %9 : tensor<512xi32> -> tensor<512xf32>
    %22 = tt.add %20, %21 : tensor<512xf32>
    tt.store %18, %22 : tensor<512x!tt.ptr<f32>>, tensor<512xf32>
    %23 = tt.splat %out_i : !tt.ptr<i32> -> tensor<512x!tt.ptr<i32>>
    %24 = tt.addptr %23, %0 : tensor<512x!tt.ptr<i32>>, tensor<512xi32>
    %25 = tt.constant 3.000000e+00 : f32 -> tensor<512xf32>
    %26 = tt.mul %6, %25 : tensor<512xf32>
    %27 = tt.cast %26 : tensor<512xf32> -> tensor<512xi32>
    %28 = tt.constant 0.000000e+00 : f32 -> tensor<512xf32>
    %29 = tt.cmp "gt", %6, %28 : tensor<512xf32> -> tensor<512xi1>
    %30 = tt.cast %29 : tensor<512xi1> -> tensor<512xi32>
    %31 = tt.add %27, %30 : tensor<512xi32>
    tt.store %24, %31 : tensor<512x!tt.ptr<i32>>, tensor<512xi32>
    %32 = tt.splat %out_b : !tt.ptr<f32> -> tensor<512x!tt.ptr<f32>>
    %33 = tt.addptr %32, %0 : tensor<512x!tt.ptr<f32>>, tensor<512xi32>
    %34 = tt.constant 3 : i32 -> tensor<512xi32>
    %35 = tt.mod %9, %34 : tensor<512xi32>
    %36 = tt.constant 0 : i32 -> tensor<512xi32>
    %37 = tt.cmp "eq", %35, %36 : tensor<512xi32> -> tensor<512xi1>
    %38 = tt.cast %37 : tensor<512xi1> -> tensor<512xf32>
    tt.store %33, %38 : tensor<512x!tt.ptr<f32>>, tensor<512xf32>
    func.return
  }
}
