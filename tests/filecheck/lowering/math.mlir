// where, sqrt, log, rsqrt, maximum/minimum (NaN-propagating, like NumPy).
// REQUIRES: mlir-tools
// RUN: tinyton-opt %s -p tinyton-to-llvm | mlir-translate --mlir-to-llvmir | llc -mtriple=nvptx64-nvidia-cuda -mcpu=sm_90 -mattr=+ptx80 | filecheck %s --check-prefix=PTX
// RUN: %if ptxas %{ tinyton-opt %s -p tinyton-to-llvm | mlir-translate --mlir-to-llvmir | llc -mtriple=nvptx64-nvidia-cuda -mcpu=sm_90 -mattr=+ptx80 -o %t.ptx && ptxas -arch=sm_90 %t.ptx -o %t.cubin %}

// PTX-DAG:   selp.f32
// PTX-DAG:   sqrt.rn.f32
// PTX-DAG:   lg2.approx.f32
// PTX-DAG:   rsqrt.approx.f32
// PTX-DAG:   max.NaN.f32
// PTX-DAG:   min.NaN.f32

builtin.module attributes {tt.num_warps = 4 : i32} {
  func.func @unary(%x_ptr: !tt.ptr<f32> {tt.divisibility = 16 : i32}, %o_ptr: !tt.ptr<f32> {tt.divisibility = 16 : i32}) {
    %0 = tt.arange 0 to 1024 : tensor<1024xi32>
    %1 = tt.splat %x_ptr : !tt.ptr<f32> -> tensor<1024x!tt.ptr<f32>>
    %2 = tt.addptr %1, %0 : tensor<1024x!tt.ptr<f32>>, tensor<1024xi32>
    %3 = tt.load %2 : tensor<1024x!tt.ptr<f32>> -> tensor<1024xf32>
    %4 = tt.abs %3 : tensor<1024xf32>
    %5 = tt.splat %o_ptr : !tt.ptr<f32> -> tensor<1024x!tt.ptr<f32>>
    %6 = tt.addptr %5, %0 : tensor<1024x!tt.ptr<f32>>, tensor<1024xi32>
    %7 = tt.constant 0.000000e+00 : f32 -> tensor<1024xf32>
    %8 = tt.cmp "gt", %3, %7 : tensor<1024xf32> -> tensor<1024xi1>
    %9 = tt.constant 1.000000e-01 : f32 -> tensor<1024xf32>
    %10 = tt.mul %3, %9 : tensor<1024xf32>
    %11 = tt.select %8, %3, %10 : tensor<1024xi1>, tensor<1024xf32>
    tt.store %6, %11 : tensor<1024x!tt.ptr<f32>>, tensor<1024xf32>
    %12 = tt.constant 1024 : i32 -> i32
    %13 = tt.addptr %o_ptr, %12 : !tt.ptr<f32>, i32
    %14 = tt.splat %13 : !tt.ptr<f32> -> tensor<1024x!tt.ptr<f32>>
    %15 = tt.addptr %14, %0 : tensor<1024x!tt.ptr<f32>>, tensor<1024xi32>
    %16 = tt.sqrt %4 : tensor<1024xf32>
    %17 = tt.constant 1.000000e+00 : f32 -> tensor<1024xf32>
    %18 = tt.add %4, %17 : tensor<1024xf32>
    %19 = tt.log %18 : tensor<1024xf32>
    %20 = tt.add %16, %19 : tensor<1024xf32>
    tt.store %15, %20 : tensor<1024x!tt.ptr<f32>>, tensor<1024xf32>
    %21 = tt.constant 2048 : i32 -> i32
    %22 = tt.addptr %o_ptr, %21 : !tt.ptr<f32>, i32
    %23 = tt.splat %22 : !tt.ptr<f32> -> tensor<1024x!tt.ptr<f32>>
    %24 = tt.addptr %23, %0 : tensor<1024x!tt.ptr<f32>>, tensor<1024xi32>
    %25 = tt.constant 5.000000e-01 : f32 -> tensor<1024xf32>
    %26 = tt.add %4, %25 : tensor<1024xf32>
    %27 = tt.rsqrt %26 : tensor<1024xf32>
    %28 = tt.sub %27, %3 : tensor<1024xf32>
    tt.store %24, %28 : tensor<1024x!tt.ptr<f32>>, tensor<1024xf32>
    %29 = tt.constant 3072 : i32 -> i32
    %30 = tt.addptr %o_ptr, %29 : !tt.ptr<f32>, i32
    %31 = tt.splat %30 : !tt.ptr<f32> -> tensor<1024x!tt.ptr<f32>>
    %32 = tt.addptr %31, %0 : tensor<1024x!tt.ptr<f32>>, tensor<1024xi32>
    %33 = tt.constant 2.500000e-01 : f32 -> tensor<1024xf32>
    %34 = tt.maximum %3, %33 : tensor<1024xf32>
    %35 = tt.constant -2.500000e-01 : f32 -> tensor<1024xf32>
    %36 = tt.minimum %3, %35 : tensor<1024xf32>
    %37 = tt.add %34, %36 : tensor<1024xf32>
    tt.store %32, %37 : tensor<1024x!tt.ptr<f32>>, tensor<1024xf32>
    func.return
  }
}
