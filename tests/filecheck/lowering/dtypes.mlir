// Triton's dtypes: unsigned ints (udiv (a multiply-high by a constant), lshr, unsigned max/compare), int64 offsets and sums (64-bit
// loads and shuffles), float8 storage (cvt.satfinite / cvt.f16x2.e4m3x2), float64 arithmetic: generated
// by the frontend from a kernel, lowered to PTX and accepted by ptxas.
// RUN: tinyton-opt %s --print-op-generic | tinyton-opt | filecheck %s --check-prefix=IR
// REQUIRES: mlir-tools
// RUN: tinyton-opt %s -p tinyton-to-llvm | mlir-translate --mlir-to-llvmir | llc -mtriple=nvptx64-nvidia-cuda -mcpu=sm_90 -mattr=+ptx80 | filecheck %s --check-prefix=PTX
// RUN: %if ptxas %{ tinyton-opt %s -p tinyton-to-llvm | mlir-translate --mlir-to-llvmir | llc -mtriple=nvptx64-nvidia-cuda -mcpu=sm_90 -mattr=+ptx80 -o %t.ptx && ptxas -arch=sm_90 %t.ptx -o %t.cubin %}

// IR:      func.func @dtypes(%u_ptr: !tt.ptr<ui32>{{.*}}, %l_ptr: !tt.ptr<i64>{{.*}}, %f8_ptr: !tt.ptr<f8E4M3FN>{{.*}}, %d_ptr: !tt.ptr<f64>{{.*}}, %o_ptr: !tt.ptr<ui8>
// IR:      tt.floordiv %{{.*}}, %{{.*}} : tensor<128xui32>
// IR:      tt.shr %{{.*}}, %{{.*}} : tensor<128xui32>
// IR:      tt.addptr %{{.*}}, %{{.*}} : tensor<128x!tt.ptr<i64>>, tensor<128xi64>
// IR:      tt.reduce_sum %{{.*}} axis = 0 : tensor<128xi64> -> i64
// IR:      tt.cast %{{.*}} : tensor<128xf8E4M3FN> -> tensor<128xf32>
// IR:      tt.cast %{{.*}} : tensor<128xf32> -> tensor<128xf8E5M2>
// IR:      tt.cast %{{.*}} : tensor<128xui32> -> tensor<128xf64>

// PTX-DAG: mul.hi.u32
// PTX-DAG: shr.u32
// PTX-DAG: max.u32
// PTX-DAG: setp.lt.u32
// PTX-DAG: ld.global.b64
// PTX-DAG: shfl.sync.bfly.b32
// PTX-DAG: cvt.rn.f16x2.e4m3x2
// PTX-DAG: cvt.rn.satfinite.e5m2x2.f32
// PTX-DAG: cvt.rn.f64.u32
// PTX-DAG: add.rn.f64
// PTX-DAG: st.global.u8

builtin.module attributes {tt.num_warps = 4 : i32} {
  func.func @dtypes(%u_ptr: !tt.ptr<ui32> {tt.divisibility = 16 : i32}, %l_ptr: !tt.ptr<i64> {tt.divisibility = 16 : i32}, %f8_ptr: !tt.ptr<f8E4M3FN> {tt.divisibility = 16 : i32}, %d_ptr: !tt.ptr<f64> {tt.divisibility = 16 : i32}, %o_ptr: !tt.ptr<ui8> {tt.divisibility = 16 : i32}) {
    %0 = tt.arange 0 to 128 : tensor<128xi32>
    %1 = tt.splat %u_ptr : !tt.ptr<ui32> -> tensor<128x!tt.ptr<ui32>>
    %2 = tt.addptr %1, %0 : tensor<128x!tt.ptr<ui32>>, tensor<128xi32>
    %3 = tt.load %2 : tensor<128x!tt.ptr<ui32>> -> tensor<128xui32>
    %4 = tt.constant 3 : ui32 -> tensor<128xui32>
    %5 = tt.floordiv %3, %4 : tensor<128xui32>
    %6 = tt.constant 1 : ui32 -> tensor<128xui32>
    %7 = tt.shr %3, %6 : tensor<128xui32>
    %8 = tt.add %5, %7 : tensor<128xui32>
    %9 = tt.constant 7 : ui32 -> tensor<128xui32>
    %10 = tt.maximum %3, %9 : tensor<128xui32>
    %11 = tt.add %8, %10 : tensor<128xui32>
    %12 = tt.cast %0 : tensor<128xi32> -> tensor<128xi64>
    %13 = tt.splat %l_ptr : !tt.ptr<i64> -> tensor<128x!tt.ptr<i64>>
    %14 = tt.addptr %13, %12 : tensor<128x!tt.ptr<i64>>, tensor<128xi64>
    %15 = tt.load %14 : tensor<128x!tt.ptr<i64>> -> tensor<128xi64>
    %16 = tt.constant 3 : i64 -> tensor<128xi64>
    %17 = tt.mul %15, %16 : tensor<128xi64>
    %18 = tt.reduce_sum %15 axis = 0 : tensor<128xi64> -> i64
    %19 = tt.splat %18 : i64 -> tensor<128xi64>
    %20 = tt.add %17, %19 : tensor<128xi64>
    %21 = tt.splat %f8_ptr : !tt.ptr<f8E4M3FN> -> tensor<128x!tt.ptr<f8E4M3FN>>
    %22 = tt.addptr %21, %0 : tensor<128x!tt.ptr<f8E4M3FN>>, tensor<128xi32>
    %23 = tt.load %22 : tensor<128x!tt.ptr<f8E4M3FN>> -> tensor<128xf8E4M3FN>
    %24 = tt.cast %23 : tensor<128xf8E4M3FN> -> tensor<128xf32>
    %25 = tt.splat %d_ptr : !tt.ptr<f64> -> tensor<128x!tt.ptr<f64>>
    %26 = tt.addptr %25, %0 : tensor<128x!tt.ptr<f64>>, tensor<128xi32>
    %27 = tt.load %26 : tensor<128x!tt.ptr<f64>> -> tensor<128xf64>
    %28 = tt.constant 2.000000e+00 : f64 -> tensor<128xf64>
    %29 = tt.mul %27, %28 : tensor<128xf64>
    %30 = tt.constant 2.000000e+00 : f32 -> tensor<128xf32>
    %31 = tt.mul %24, %30 : tensor<128xf32>
    %32 = tt.cast %31 : tensor<128xf32> -> tensor<128xf8E5M2>
    %33 = tt.cast %32 : tensor<128xf8E5M2> -> tensor<128xf8E4M3FN>
    tt.store %22, %33 : tensor<128x!tt.ptr<f8E4M3FN>>, tensor<128xf8E4M3FN>
    %34 = tt.cast %11 : tensor<128xui32> -> tensor<128xf64>
    %35 = tt.add %29, %34 : tensor<128xf64>
    %36 = tt.cast %20 : tensor<128xi64> -> tensor<128xf64>
    %37 = tt.add %35, %36 : tensor<128xf64>
    tt.store %26, %37 : tensor<128x!tt.ptr<f64>>, tensor<128xf64>
    %38 = tt.splat %o_ptr : !tt.ptr<ui8> -> tensor<128x!tt.ptr<ui8>>
    %39 = tt.addptr %38, %0 : tensor<128x!tt.ptr<ui8>>, tensor<128xi32>
    %40 = tt.constant 9 : ui32 -> tensor<128xui32>
    %41 = tt.cmp "lt", %11, %40 : tensor<128xui32> -> tensor<128xi1>
    %42 = tt.cast %41 : tensor<128xi1> -> tensor<128xui8>
    tt.store %39, %42 : tensor<128x!tt.ptr<ui8>>, tensor<128xui8>
    func.return
  }
}
