// An f32 tile rounded to bf16 and f16 two registers at a time (`cvt.rn.bf16x2.f32`, `cvt.rn.f16x2.f32`): rounded one
// at a time, a matmul's accumulators made ptxas serialise the K loop's wgmma (tests/test_wgmma_in_flight.py).
// RUN: tinyton-opt %s --print-op-generic | tinyton-opt | filecheck %s --check-prefix=IR
// REQUIRES: mlir-tools
// RUN: tinyton-opt %s -p tinyton-to-llvm | mlir-translate --mlir-to-llvmir | llc -mtriple=nvptx64-nvidia-cuda -mcpu=sm_90 -mattr=+ptx80 | filecheck %s --check-prefix=PTX
// RUN: %if ptxas %{ tinyton-opt %s -p tinyton-to-llvm | mlir-translate --mlir-to-llvmir | llc -mtriple=nvptx64-nvidia-cuda -mcpu=sm_90 -mattr=+ptx80 -o %t.ptx && ptxas -arch=sm_90 %t.ptx -o %t.cubin %}

// IR:      tt.cast %{{.*}} : tensor<1024xf32> -> tensor<1024xbf16>
// IR:      tt.cast %{{.*}} : tensor<1024xf32> -> tensor<1024xf16>

// PTX-NOT: cvt.rn.bf16.f32
// PTX-NOT: cvt.rn.f16.f32
// PTX-DAG: cvt.rn.bf16x2.f32
// PTX-DAG: cvt.rn.f16x2.f32
// PTX-NOT: cvt.rn.bf16.f32
// PTX-NOT: cvt.rn.f16.f32

builtin.module attributes {tt.num_warps = 4 : i32} {
  func.func @cast_pairs(%x_ptr: !tt.ptr<f32> {tt.divisibility = 16 : i32}, %b_ptr: !tt.ptr<bf16> {tt.divisibility = 16 : i32}, %h_ptr: !tt.ptr<f16> {tt.divisibility = 16 : i32}) {
    %0 = tt.arange 0 to 1024 : tensor<1024xi32>
    %1 = tt.splat %x_ptr : !tt.ptr<f32> -> tensor<1024x!tt.ptr<f32>>
    %2 = tt.addptr %1, %0 : tensor<1024x!tt.ptr<f32>>, tensor<1024xi32>
    %3 = tt.load %2 : tensor<1024x!tt.ptr<f32>> -> tensor<1024xf32>
    %4 = tt.cast %3 : tensor<1024xf32> -> tensor<1024xbf16>
    %5 = tt.splat %b_ptr : !tt.ptr<bf16> -> tensor<1024x!tt.ptr<bf16>>
    %6 = tt.addptr %5, %0 : tensor<1024x!tt.ptr<bf16>>, tensor<1024xi32>
    tt.store %6, %4 : tensor<1024x!tt.ptr<bf16>>, tensor<1024xbf16>
    %7 = tt.cast %3 : tensor<1024xf32> -> tensor<1024xf16>
    %8 = tt.splat %h_ptr : !tt.ptr<f16> -> tensor<1024x!tt.ptr<f16>>
    %9 = tt.addptr %8, %0 : tensor<1024x!tt.ptr<f16>>, tensor<1024xi32>
    tt.store %9, %7 : tensor<1024x!tt.ptr<f16>>, tensor<1024xf16>
    func.return
  }
}
