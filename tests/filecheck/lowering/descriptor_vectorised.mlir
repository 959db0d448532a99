// A descriptor load and store outside a dot loop (`y_desc.store([m, n], x_desc.load([m, n]) * 2)` on host
// descriptors of f16, 16x32 blocks, one warp), as the frontend emits it: the last strides (%x_desc_4,
// %y_desc_4) are specialised as the constant 1 (%0) and the sizes and row strides as multiples of 16, so
// each thread moves 16-byte vectors: 2 predicated v4 loads and 2 v4 stores, no element-wise access.
// REQUIRES: mlir-tools
// RUN: tinyton-opt %s -p tinyton-to-llvm | filecheck %s --check-prefix=LLVM
// RUN: tinyton-opt %s -p tinyton-to-llvm | mlir-translate --mlir-to-llvmir | llc -mtriple=nvptx64-nvidia-cuda -mcpu=sm_90a -mattr=+ptx80 | filecheck %s --check-prefix=PTX
// RUN: %if ptxas %{ tinyton-opt %s -p tinyton-to-llvm | mlir-translate --mlir-to-llvmir | llc -mtriple=nvptx64-nvidia-cuda -mcpu=sm_90a -mattr=+ptx80 -o %t.ptx && ptxas -arch=sm_90a %t.ptx -o %t.cubin %}

// LLVM:      llvm.func @scale_desc(
// LLVM-COUNT-2: ld.global.v4.b32 { $0, $1, $2, $3 }, [ $4 + 0 ];"
// LLVM-COUNT-2: st.global.v4.b32 [ $0 + 0 ], { $1, $2, $3, $4 };"
// LLVM-NOT:  ld.global.b16
// LLVM-NOT:  st.global.b16
//
// PTX:       .entry scale_desc(
// PTX-COUNT-2: ld.global.v4.b32
// PTX-COUNT-2: st.global.v4.b32
// PTX-NOT:   ld.global.b16
// PTX-NOT:   st.global.b16

builtin.module attributes {tt.num_warps = 1 : i32} {
  func.func @scale_desc(%x_desc: !tt.ptr<f16> {tt.divisibility = 16 : i32}, %x_desc_1: i32 {tt.divisibility = 16 : i32}, %x_desc_2: i32 {tt.divisibility = 16 : i32}, %x_desc_3: i32 {tt.divisibility = 16 : i32}, %x_desc_4: i32, %y_desc: !tt.ptr<f16> {tt.divisibility = 16 : i32}, %y_desc_1: i32 {tt.divisibility = 16 : i32}, %y_desc_2: i32 {tt.divisibility = 16 : i32}, %y_desc_3: i32 {tt.divisibility = 16 : i32}, %y_desc_4: i32) {
    %0 = tt.constant 1 : i32 -> i32
    %1 = tt.program_id 0 : i32
    %2 = tt.constant 16 : i32 -> i32
    %3 = tt.mul %1, %2 : i32
    %4 = tt.program_id 1 : i32
    %5 = tt.constant 32 : i32 -> i32
    %6 = tt.mul %4, %5 : i32
    %7 = tt.constant 0 : i32 -> i32
    %8 = tt.add %7, %3 : i32
    %9 = tt.add %7, %6 : i32
    %10 = tt.arange 0 to 16 : tensor<16xi32>
    %11 = tt.splat %8 : i32 -> tensor<16xi32>
    %12 = tt.add %10, %11 : tensor<16xi32>
    %13 = tt.expand_dims %12 axis = 1 : tensor<16xi32> -> tensor<16x1xi32>
    %14 = tt.splat %x_desc_3 : i32 -> tensor<16x1xi32>
    %15 = tt.mul %13, %14 : tensor<16x1xi32>
    %16 = tt.splat %x_desc : !tt.ptr<f16> -> tensor<16x1x!tt.ptr<f16>>
    %17 = tt.addptr %16, %15 : tensor<16x1x!tt.ptr<f16>>, tensor<16x1xi32>
    %18 = tt.constant 0 : i32 -> tensor<16x1xi32>
    %19 = tt.cmp "ge", %13, %18 : tensor<16x1xi32> -> tensor<16x1xi1>
    %20 = tt.splat %x_desc_1 : i32 -> tensor<16x1xi32>
    %21 = tt.cmp "lt", %13, %20 : tensor<16x1xi32> -> tensor<16x1xi1>
    %22 = tt.and %19, %21 : tensor<16x1xi1>
    %23 = tt.arange 0 to 32 : tensor<32xi32>
    %24 = tt.splat %9 : i32 -> tensor<32xi32>
    %25 = tt.add %23, %24 : tensor<32xi32>
    %26 = tt.expand_dims %25 axis = 0 : tensor<32xi32> -> tensor<1x32xi32>
    %27 = tt.splat %0 : i32 -> tensor<1x32xi32>
    %28 = tt.mul %26, %27 : tensor<1x32xi32>
    %29 = tt.broadcast %28 : tensor<1x32xi32> -> tensor<16x32xi32>
    %30 = tt.broadcast %17 : tensor<16x1x!tt.ptr<f16>> -> tensor<16x32x!tt.ptr<f16>>
    %31 = tt.addptr %30, %29 : tensor<16x32x!tt.ptr<f16>>, tensor<16x32xi32>
    %32 = tt.constant 0 : i32 -> tensor<1x32xi32>
    %33 = tt.cmp "ge", %26, %32 : tensor<1x32xi32> -> tensor<1x32xi1>
    %34 = tt.splat %x_desc_2 : i32 -> tensor<1x32xi32>
    %35 = tt.cmp "lt", %26, %34 : tensor<1x32xi32> -> tensor<1x32xi1>
    %36 = tt.and %33, %35 : tensor<1x32xi1>
    %37 = tt.broadcast %22 : tensor<16x1xi1> -> tensor<16x32xi1>
    %38 = tt.broadcast %36 : tensor<1x32xi1> -> tensor<16x32xi1>
    %39 = tt.and %37, %38 : tensor<16x32xi1>
    %40 = tt.constant 0.000000e+00 : f16 -> tensor<16x32xf16>
    %41 = "tt.descriptor_load"(%31, %39, %40, %x_desc, %x_desc_1, %x_desc_2, %x_desc_3, %0, %8, %9) <{padding = "zero", operandSegmentSizes = array<i32: 1, 1, 1, 1, 2, 2, 2>}> : (tensor<16x32x!tt.ptr<f16>>, tensor<16x32xi1>, tensor<16x32xf16>, !tt.ptr<f16>, i32, i32, i32, i32, i32, i32) -> tensor<16x32xf16>
    %42 = tt.constant 2.000000e+00 : f16 -> tensor<16x32xf16>
    %43 = tt.mul %41, %42 : tensor<16x32xf16>
    %44 = tt.splat %y_desc_3 : i32 -> tensor<16x1xi32>
    %45 = tt.mul %13, %44 : tensor<16x1xi32>
    %46 = tt.splat %y_desc : !tt.ptr<f16> -> tensor<16x1x!tt.ptr<f16>>
    %47 = tt.addptr %46, %45 : tensor<16x1x!tt.ptr<f16>>, tensor<16x1xi32>
    %48 = tt.splat %y_desc_1 : i32 -> tensor<16x1xi32>
    %49 = tt.cmp "lt", %13, %48 : tensor<16x1xi32> -> tensor<16x1xi1>
    %50 = tt.and %19, %49 : tensor<16x1xi1>
    %51 = tt.broadcast %47 : tensor<16x1x!tt.ptr<f16>> -> tensor<16x32x!tt.ptr<f16>>
    %52 = tt.addptr %51, %29 : tensor<16x32x!tt.ptr<f16>>, tensor<16x32xi32>
    %53 = tt.splat %y_desc_2 : i32 -> tensor<1x32xi32>
    %54 = tt.cmp "lt", %26, %53 : tensor<1x32xi32> -> tensor<1x32xi1>
    %55 = tt.and %33, %54 : tensor<1x32xi1>
    %56 = tt.broadcast %50 : tensor<16x1xi1> -> tensor<16x32xi1>
    %57 = tt.broadcast %55 : tensor<1x32xi1> -> tensor<16x32xi1>
    %58 = tt.and %56, %57 : tensor<16x32xi1>
    tt.store %52, %43 mask %58 : tensor<16x32x!tt.ptr<f16>>, tensor<16x32xf16>, tensor<16x32xi1>
    func.return
  }
}
