// The C math library ops (tt_libm: tinyton/lowering/tt_to_llvm/libm.py): tanh, log1p and expm1 on ex2/lg2
// with series near 0, trunc/rint as cvt.rzi/cvt.rni, copysign, fmax (NaN-ignoring max), atan2, hypot.
// REQUIRES: mlir-tools
// RUN: tinyton-opt %s -p tinyton-to-llvm | filecheck %s
// RUN: tinyton-opt %s -p tinyton-to-llvm | mlir-translate --mlir-to-llvmir | llc -mtriple=nvptx64-nvidia-cuda -mcpu=sm_90 -mattr=+ptx80 | filecheck %s --check-prefix=PTX
// RUN: %if ptxas %{ tinyton-opt %s -p tinyton-to-llvm | mlir-translate --mlir-to-llvmir | llc -mtriple=nvptx64-nvidia-cuda -mcpu=sm_90 -mattr=+ptx80 -o %t.ptx && ptxas -arch=sm_90 %t.ptx -o %t.cubin %}

// CHECK-DAG:   llvm.call_intrinsic "llvm.trunc.f32"
// CHECK-DAG:   llvm.call_intrinsic "llvm.rint.f32"
// CHECK-DAG:   llvm.call_intrinsic "llvm.copysign.f32"
// CHECK-DAG:   llvm.call_intrinsic "llvm.maxnum.f32"
// CHECK-DAG:   llvm.call_intrinsic "llvm.nvvm.lg2.approx.f"
// CHECK-NOT:   __nv_

// PTX-DAG:     cvt.rzi.f32.f32
// PTX-DAG:     cvt.rni.f32.f32
// PTX-DAG:     ex2.approx
// PTX-DAG:     lg2.approx.f32
// PTX-DAG:     max.f32
// PTX-DAG:     sqrt.rn.f32

builtin.module attributes {tt.num_warps = 4 : i32} {
  func.func @libm(%v: !tt.ptr<f32> {tt.divisibility = 16 : i32}, %w: !tt.ptr<f32> {tt.divisibility = 16 : i32}, %out0: !tt.ptr<f32> {tt.divisibility = 16 : i32}) {
    %0 = tt.arange 0 to 1024 : tensor<1024xi32>
    %3 = tt.splat %v : !tt.ptr<f32> -> tensor<1024x!tt.ptr<f32>>
    %4 = tt.addptr %3, %0 : tensor<1024x!tt.ptr<f32>>, tensor<1024xi32>
    %5 = tt.load %4 : tensor<1024x!tt.ptr<f32>> -> tensor<1024xf32>
    %6 = tt.splat %w : !tt.ptr<f32> -> tensor<1024x!tt.ptr<f32>>
    %7 = tt.addptr %6, %0 : tensor<1024x!tt.ptr<f32>>, tensor<1024xi32>
    %8 = tt.load %7 : tensor<1024x!tt.ptr<f32>> -> tensor<1024xf32>
    %9 = tt.expm1 %8 : tensor<1024xf32>
    %10 = tt.hypot %5, %8 : tensor<1024xf32>
    %11 = tt.atan2 %5, %8 : tensor<1024xf32>
    %12 = tt.fmax %5, %8 : tensor<1024xf32>
    %13 = tt.copysign %5, %8 : tensor<1024xf32>
    %14 = tt.rint %8 : tensor<1024xf32>
    %15 = tt.trunc %5 : tensor<1024xf32>
    %16 = tt.mul %15, %14 : tensor<1024xf32>
    %17 = tt.log1p %5 : tensor<1024xf32>
    %18 = tt.tanh %5 : tensor<1024xf32>
    %19 = tt.add %18, %17 : tensor<1024xf32>
    %20 = tt.add %19, %16 : tensor<1024xf32>
    %21 = tt.add %20, %13 : tensor<1024xf32>
    %22 = tt.add %21, %12 : tensor<1024xf32>
    %23 = tt.add %22, %11 : tensor<1024xf32>
    %24 = tt.add %23, %10 : tensor<1024xf32>
    %25 = tt.add %24, %9 : tensor<1024xf32>
    %26 = tt.splat %out0 : !tt.ptr<f32> -> tensor<1024x!tt.ptr<f32>>
    %27 = tt.addptr %26, %0 : tensor<1024x!tt.ptr<f32>>, tensor<1024xi32>
    tt.store %27, %25 : tensor<1024x!tt.ptr<f32>>, tensor<1024xf32>
    func.return
  }
}
