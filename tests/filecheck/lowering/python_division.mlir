// NumPy's // and % of array programs by a runtime divisor (floor division, remainder with the
// divisor's sign), on ints and floats; an int divisor of 0 gives 0 (NumPy's), guarded: LLVM's sdiv by
// zero is undefined.
// REQUIRES: mlir-tools
// RUN: tinyton-opt %s -p tinyton-to-llvm | filecheck %s --check-prefix=LLVM
// RUN: tinyton-opt %s -p tinyton-to-llvm | mlir-translate --mlir-to-llvmir | llc -mtriple=nvptx64-nvidia-cuda -mcpu=sm_90 -mattr=+ptx80 | filecheck %s --check-prefix=PTX
// RUN: %if ptxas %{ tinyton-opt %s -p tinyton-to-llvm | mlir-translate --mlir-to-llvmir | llc -mtriple=nvptx64-nvidia-cuda -mcpu=sm_90 -mattr=+ptx80 -o %t.ptx && ptxas -arch=sm_90 %t.ptx -o %t.cubin %}

// LLVM-LABEL: llvm.func @pymath
// LLVM:      llvm.icmp "eq"
// LLVM:      llvm.select
// LLVM:      llvm.sdiv
// LLVM:      llvm.srem
// LLVM:      llvm.xor
// LLVM:      llvm.icmp "slt"
// LLVM:      llvm.select
// LLVM-NOT:  llvm.frem
// LLVM:      %[[R:.*]] = llvm.call @__tinyton_fmod_f64(%{{.*}}, %{{.*}}) : (f64, f64) -> f64
// LLVM:      llvm.fptrunc %[[R]] : f64 to f32

// The float % is exact: the helper's loop reduces by t = |b| * 2**k with an fma, no frem's approximation
// (llc alone calls it; tinyton's O3 pipeline inlines it).
// PTX:       .func (.param .b64 func_retval0) __tinyton_fmod_f64(
// PTX:       div.rn.f64
// PTX:       cvt.rzi.f64.f64
// PTX:       fma.rn.f64
// PTX:       copysign.f64
// PTX-LABEL: .entry pymath(
// PTX:       div.s32
// PTX:       call.uni (retval0), __tinyton_fmod_f64

builtin.module attributes {tt.num_warps = 4 : i32} {
  func.func @pymath(%x_ptr: !tt.ptr<i32> {tt.divisibility = 16 : i32}, %d: i32, %q_ptr: !tt.ptr<i32> {tt.divisibility = 16 : i32}, %m_ptr: !tt.ptr<i32> {tt.divisibility = 16 : i32}, %f_ptr: !tt.ptr<f32> {tt.divisibility = 16 : i32}, %fm_ptr: !tt.ptr<f32> {tt.divisibility = 16 : i32}) {
    %0 = tt.arange 0 to 256 : tensor<256xi32>
    %1 = tt.splat %x_ptr : !tt.ptr<i32> -> tensor<256x!tt.ptr<i32>>
    %2 = tt.addptr %1, %0 : tensor<256x!tt.ptr<i32>>, tensor<256xi32>
    %3 = tt.load %2 : tensor<256x!tt.ptr<i32>> -> tensor<256xi32>
    %4 = tt.splat %q_ptr : !tt.ptr<i32> -> tensor<256x!tt.ptr<i32>>
    %5 = tt.addptr %4, %0 : tensor<256x!tt.ptr<i32>>, tensor<256xi32>
    %6 = tt.splat %d : i32 -> tensor<256xi32>
    %7 = tt.floordiv %3, %6 : tensor<256xi32>
    tt.store %5, %7 : tensor<256x!tt.ptr<i32>>, tensor<256xi32>
    %8 = tt.splat %m_ptr : !tt.ptr<i32> -> tensor<256x!tt.ptr<i32>>
    %9 = tt.addptr %8, %0 : tensor<256x!tt.ptr<i32>>, tensor<256xi32>
    %10 = tt.mod %3, %6 : tensor<256xi32>
    tt.store %9, %10 : tensor<256x!tt.ptr<i32>>, tensor<256xi32>
    %11 = tt.cast %3 : tensor<256xi32> -> tensor<256xf32>
    %12 = tt.constant 3.700000e-01 : f32 -> tensor<256xf32>
    %13 = tt.mul %11, %12 : tensor<256xf32>
    %14 = tt.splat %f_ptr : !tt.ptr<f32> -> tensor<256x!tt.ptr<f32>>
    %15 = tt.addptr %14, %0 : tensor<256x!tt.ptr<f32>>, tensor<256xi32>
    tt.store %15, %13 : tensor<256x!tt.ptr<f32>>, tensor<256xf32>
    %16 = tt.splat %fm_ptr : !tt.ptr<f32> -> tensor<256x!tt.ptr<f32>>
    %17 = tt.addptr %16, %0 : tensor<256x!tt.ptr<f32>>, tensor<256xi32>
    %18 = tt.constant 1.500000e+00 : f32 -> tensor<256xf32>
    %19 = tt.mod %13, %18 : tensor<256xf32>
    tt.store %17, %19 : tensor<256x!tt.ptr<f32>>, tensor<256xf32>
    func.return
  }
}
