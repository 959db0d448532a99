// A kernel's // and % (Triton's, C's): tt.div truncates, tt.rem takes the dividend's sign (for floats the
// exact fmod helper, never LLVM's frem: NVPTX expands that as a - b * trunc(a / b), off by ulps of a). A runtime int divisor is guarded (LLVM's sdiv/srem by zero is undefined): where it is 0, the
// divisor becomes 1 and the result -1 (tt.div) or the dividend (tt.rem). A known non-zero divisor needs
// no guard.
// REQUIRES: mlir-tools
// RUN: tinyton-opt %s -p tinyton-to-llvm | filecheck %s --check-prefix=LLVM
// RUN: %if ptxas %{ tinyton-opt %s -p tinyton-to-llvm | mlir-translate --mlir-to-llvmir | llc -mtriple=nvptx64-nvidia-cuda -mcpu=sm_90 -mattr=+ptx80 -o %t.ptx && ptxas -arch=sm_90 %t.ptx -o %t.cubin %}

// LLVM-LABEL: llvm.func @cdiv
// LLVM-DAG:  %[[ONE:.*]] = llvm.mlir.constant(1 : i32) : i32
// LLVM-DAG:  %[[MINUS_ONE:.*]] = llvm.mlir.constant(-1 : i32) : i32
// LLVM-DAG:  %[[ZERO:.*]] = llvm.mlir.constant(0 : i32) : i32
// LLVM-DAG:  %[[SEVEN:.*]] = llvm.mlir.constant(7 : i32) : i32
// LLVM:      %[[IS0:.*]] = llvm.icmp "eq" %[[D:.*]], %[[ZERO]] : i32
// LLVM:      %[[SAFE:.*]] = llvm.select %[[IS0]], %[[ONE]], %[[D]] : i1, i32
// LLVM:      %[[Q:.*]] = llvm.sdiv %[[X:.*]], %[[SAFE]] : i32
// LLVM:      llvm.select %[[IS0]], %[[MINUS_ONE]], %[[Q]] : i1, i32
// LLVM:      %[[IS0B:.*]] = llvm.icmp "eq" %[[D]], %[[ZERO]] : i32
// LLVM:      %[[SAFEB:.*]] = llvm.select %[[IS0B]], %[[ONE]], %[[D]] : i1, i32
// LLVM:      %[[R:.*]] = llvm.srem %[[X]], %[[SAFEB]] : i32
// LLVM:      llvm.select %[[IS0B]], %[[X]], %[[R]] : i1, i32
// LLVM:      llvm.sdiv %{{.*}}, %[[SEVEN]] : i32
// LLVM-NOT:  llvm.select
// LLVM-NOT:  llvm.frem
// LLVM:      llvm.call @__tinyton_fmod_f64(%{{.*}}, %{{.*}}) : (f64, f64) -> f64

builtin.module attributes {tt.num_warps = 4 : i32} {
  func.func @cdiv(%x_ptr: !tt.ptr<i32> {tt.divisibility = 16 : i32}, %d: i32, %q_ptr: !tt.ptr<i32> {tt.divisibility = 16 : i32}, %f_ptr: !tt.ptr<f32> {tt.divisibility = 16 : i32}) {
    %0 = tt.arange 0 to 128 : tensor<128xi32>
    %1 = tt.splat %x_ptr : !tt.ptr<i32> -> tensor<128x!tt.ptr<i32>>
    %2 = tt.addptr %1, %0 : tensor<128x!tt.ptr<i32>>, tensor<128xi32>
    %3 = tt.load %2 : tensor<128x!tt.ptr<i32>> -> tensor<128xi32>
    %4 = tt.splat %d : i32 -> tensor<128xi32>
    %5 = tt.div %3, %4 : tensor<128xi32>
    %6 = tt.rem %3, %4 : tensor<128xi32>
    %7 = tt.add %5, %6 : tensor<128xi32>
    %8 = tt.constant 7 : i32 -> tensor<128xi32>
    %9 = tt.div %7, %8 : tensor<128xi32>
    %10 = tt.splat %q_ptr : !tt.ptr<i32> -> tensor<128x!tt.ptr<i32>>
    %11 = tt.addptr %10, %0 : tensor<128x!tt.ptr<i32>>, tensor<128xi32>
    tt.store %11, %9 : tensor<128x!tt.ptr<i32>>, tensor<128xi32>
    %12 = tt.cast %3 : tensor<128xi32> -> tensor<128xf32>
    %13 = tt.constant 1.500000e+00 : f32 -> tensor<128xf32>
    %14 = tt.rem %12, %13 : tensor<128xf32>
    %15 = tt.splat %f_ptr : !tt.ptr<f32> -> tensor<128x!tt.ptr<f32>>
    %16 = tt.addptr %15, %0 : tensor<128x!tt.ptr<f32>>, tensor<128xi32>
    tt.store %16, %14 : tensor<128x!tt.ptr<f32>>, tensor<128xf32>
    func.return
  }
}
