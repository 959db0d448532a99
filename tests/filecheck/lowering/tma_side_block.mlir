// tma_pipelined.mlir's K loop with a block no dot reads: b's block loaded a second time and summed into a carried
// value (as an attention's bias block is added to its scores). On sm_90a tinyton-pipeline copies it by TMA into a
// third buffer of the ring beside A and B, and the loop reads it back from its slot (`pipeline_plan.tma_block`):
// three copies a stage, no descriptor load left in the loop (in the 48 KiB of the default limit its slots would
// cost the ring a stage, and it stays a plain load).
// REQUIRES: mlir-tools
// RUN: tinyton-opt %s -p 'tinyton-pipeline{arch="sm_90a" shared_limit=232448}' | filecheck %s
// RUN: %if ptxas %{ tinyton-opt %s -p 'tinyton-to-llvm{arch="sm_90a"}' | mlir-opt --convert-nvvm-to-llvm | mlir-translate --mlir-to-llvmir | llc -mtriple=nvptx64-nvidia-cuda -mcpu=sm_90a -mattr=+ptx80 -o %t.ptx && ptxas -arch=sm_90a %t.ptx -o %t.cubin %}

// CHECK:      tt.local_alloc : memref<4x64x32xf16, 3 : i32>
// CHECK:      tt.local_alloc : memref<4x32x64xf16, 3 : i32>
// CHECK:      %[[SIDE:.*]] = tt.local_alloc : memref<4x32x64xf16, 3 : i32>
// CHECK:      scf.for
// CHECK-NEXT:   tt.tma_wait
// CHECK:        %[[READ:.*]] = tt.local_load %[[SIDE]]
// CHECK-COUNT-3: "tt.tma_copy"
// CHECK:        tt.tma_arrive
// CHECK:        tt.cast %[[READ]]
// CHECK-NOT:  tt.descriptor_load

builtin.module attributes {tt.num_warps = 4 : i32} {
  func.func @made_matmul(%a_ptr: !tt.ptr<f16> {tt.divisibility = 16 : i32}, %b_ptr: !tt.ptr<f16> {tt.divisibility = 16 : i32}, %c_ptr: !tt.ptr<f32> {tt.divisibility = 16 : i32}, %M: i32 {tt.divisibility = 16 : i32}, %N: i32 {tt.divisibility = 16 : i32}, %K: i32 {tt.divisibility = 16 : i32}) {
    %0 = tt.program_id 0 : i32
    %1 = tt.program_id 1 : i32
    %2 = tt.constant 0.000000e+00 : f32 -> tensor<64x64xf32>
    %3 = tt.constant 0 : i32 -> i32
    %4 = tt.constant 32 : i32 -> i32
    %sums = tt.constant 0.000000e+00 : f32 -> tensor<32x64xf32>
    %5, %side_sum = scf.for %6 = %3 to %K step %4 iter_args(%7 = %2, %prev = %sums) -> (tensor<64x64xf32>, tensor<32x64xf32>) : i32 {
      %8 = tt.constant 64 : i32 -> i32
      %9 = tt.mul %0, %8 : i32
      %10 = tt.add %3, %9 : i32
      %11 = tt.add %3, %6 : i32
      %12 = tt.arange 0 to 64 : tensor<64xi32>
      %13 = tt.splat %10 : i32 -> tensor<64xi32>
      %14 = tt.add %12, %13 : tensor<64xi32>
      %15 = tt.expand_dims %14 axis = 1 : tensor<64xi32> -> tensor<64x1xi32>
      %16 = tt.splat %K : i32 -> tensor<64x1xi32>
      %17 = tt.mul %15, %16 : tensor<64x1xi32>
      %18 = tt.splat %a_ptr : !tt.ptr<f16> -> tensor<64x1x!tt.ptr<f16>>
      %19 = tt.addptr %18, %17 : tensor<64x1x!tt.ptr<f16>>, tensor<64x1xi32>
      %20 = tt.constant 0 : i32 -> tensor<64x1xi32>
      %21 = tt.cmp "ge", %15, %20 : tensor<64x1xi32> -> tensor<64x1xi1>
      %22 = tt.splat %M : i32 -> tensor<64x1xi32>
      %23 = tt.cmp "lt", %15, %22 : tensor<64x1xi32> -> tensor<64x1xi1>
      %24 = tt.and %21, %23 : tensor<64x1xi1>
      %25 = tt.arange 0 to 32 : tensor<32xi32>
      %26 = tt.splat %11 : i32 -> tensor<32xi32>
      %27 = tt.add %25, %26 : tensor<32xi32>
      %28 = tt.expand_dims %27 axis = 0 : tensor<32xi32> -> tensor<1x32xi32>
      %29 = tt.constant 1 : i32 -> tensor<1x32xi32>
      %30 = tt.mul %28, %29 : tensor<1x32xi32>
      %31 = tt.broadcast %30 : tensor<1x32xi32> -> tensor<64x32xi32>
      %32 = tt.broadcast %19 : tensor<64x1x!tt.ptr<f16>> -> tensor<64x32x!tt.ptr<f16>>
      %33 = tt.addptr %32, %31 : tensor<64x32x!tt.ptr<f16>>, tensor<64x32xi32>
      %34 = tt.constant 0 : i32 -> tensor<1x32xi32>
      %35 = tt.cmp "ge", %28, %34 : tensor<1x32xi32> -> tensor<1x32xi1>
      %36 = tt.splat %K : i32 -> tensor<1x32xi32>
      %37 = tt.cmp "lt", %28, %36 : tensor<1x32xi32> -> tensor<1x32xi1>
      %38 = tt.and %35, %37 : tensor<1x32xi1>
      %39 = tt.broadcast %24 : tensor<64x1xi1> -> tensor<64x32xi1>
      %40 = tt.broadcast %38 : tensor<1x32xi1> -> tensor<64x32xi1>
      %41 = tt.and %39, %40 : tensor<64x32xi1>
      %42 = tt.constant 0.000000e+00 : f16 -> tensor<64x32xf16>
      %43 = tt.constant 1 : i32 -> i32
      %44 = "tt.descriptor_load"(%33, %41, %42, %a_ptr, %M, %K, %K, %43, %10, %11) <{padding = "zero", operandSegmentSizes = array<i32: 1, 1, 1, 1, 2, 2, 2>}> : (tensor<64x32x!tt.ptr<f16>>, tensor<64x32xi1>, tensor<64x32xf16>, !tt.ptr<f16>, i32, i32, i32, i32, i32, i32) -> tensor<64x32xf16>
      %45 = tt.mul %1, %8 : i32
      %46 = tt.add %3, %45 : i32
      %47 = tt.expand_dims %27 axis = 1 : tensor<32xi32> -> tensor<32x1xi32>
      %48 = tt.splat %N : i32 -> tensor<32x1xi32>
      %49 = tt.mul %47, %48 : tensor<32x1xi32>
      %50 = tt.splat %b_ptr : !tt.ptr<f16> -> tensor<32x1x!tt.ptr<f16>>
      %51 = tt.addptr %50, %49 : tensor<32x1x!tt.ptr<f16>>, tensor<32x1xi32>
      %52 = tt.constant 0 : i32 -> tensor<32x1xi32>
      %53 = tt.cmp "ge", %47, %52 : tensor<32x1xi32> -> tensor<32x1xi1>
      %54 = tt.splat %K : i32 -> tensor<32x1xi32>
      %55 = tt.cmp "lt", %47, %54 : tensor<32x1xi32> -> tensor<32x1xi1>
      %56 = tt.and %53, %55 : tensor<32x1xi1>
      %57 = tt.splat %46 : i32 -> tensor<64xi32>
      %58 = tt.add %12, %57 : tensor<64xi32>
      %59 = tt.expand_dims %58 axis = 0 : tensor<64xi32> -> tensor<1x64xi32>
      %60 = tt.constant 1 : i32 -> tensor<1x64xi32>
      %61 = tt.mul %59, %60 : tensor<1x64xi32>
      %62 = tt.broadcast %61 : tensor<1x64xi32> -> tensor<32x64xi32>
      %63 = tt.broadcast %51 : tensor<32x1x!tt.ptr<f16>> -> tensor<32x64x!tt.ptr<f16>>
      %64 = tt.addptr %63, %62 : tensor<32x64x!tt.ptr<f16>>, tensor<32x64xi32>
      %65 = tt.constant 0 : i32 -> tensor<1x64xi32>
      %66 = tt.cmp "ge", %59, %65 : tensor<1x64xi32> -> tensor<1x64xi1>
      %67 = tt.splat %N : i32 -> tensor<1x64xi32>
      %68 = tt.cmp "lt", %59, %67 : tensor<1x64xi32> -> tensor<1x64xi1>
      %69 = tt.and %66, %68 : tensor<1x64xi1>
      %70 = tt.broadcast %56 : tensor<32x1xi1> -> tensor<32x64xi1>
      %71 = tt.broadcast %69 : tensor<1x64xi1> -> tensor<32x64xi1>
      %72 = tt.and %70, %71 : tensor<32x64xi1>
      %73 = tt.constant 0.000000e+00 : f16 -> tensor<32x64xf16>
      %74 = "tt.descriptor_load"(%64, %72, %73, %b_ptr, %K, %N, %N, %43, %11, %46) <{padding = "zero", operandSegmentSizes = array<i32: 1, 1, 1, 1, 2, 2, 2>}> : (tensor<32x64x!tt.ptr<f16>>, tensor<32x64xi1>, tensor<32x64xf16>, !tt.ptr<f16>, i32, i32, i32, i32, i32, i32) -> tensor<32x64xf16>
      %75 = tt.dot %44, %74, %7 : tensor<64x32xf16>, tensor<32x64xf16> -> tensor<64x64xf32>
      %side = "tt.descriptor_load"(%64, %72, %73, %b_ptr, %K, %N, %N, %43, %11, %46) <{padding = "zero", operandSegmentSizes = array<i32: 1, 1, 1, 1, 2, 2, 2>}> : (tensor<32x64x!tt.ptr<f16>>, tensor<32x64xi1>, tensor<32x64xf16>, !tt.ptr<f16>, i32, i32, i32, i32, i32, i32) -> tensor<32x64xf16>
      %wide = tt.cast %side : tensor<32x64xf16> -> tensor<32x64xf32>
      %next = tt.add %prev, %wide : tensor<32x64xf32>
      scf.yield %75, %next : tensor<64x64xf32>, tensor<32x64xf32>
    }
    %76 = tt.constant 64 : i32 -> i32
    %77 = tt.mul %0, %76 : i32
    %78 = tt.arange 0 to 64 : tensor<64xi32>
    %79 = tt.expand_dims %78 axis = 1 : tensor<64xi32> -> tensor<64x1xi32>
    %80 = tt.splat %77 : i32 -> tensor<64x1xi32>
    %81 = tt.add %80, %79 : tensor<64x1xi32>
    %82 = tt.mul %1, %76 : i32
    %83 = tt.expand_dims %78 axis = 0 : tensor<64xi32> -> tensor<1x64xi32>
    %84 = tt.splat %82 : i32 -> tensor<1x64xi32>
    %85 = tt.add %84, %83 : tensor<1x64xi32>
    %86 = tt.splat %N : i32 -> tensor<64x1xi32>
    %87 = tt.mul %81, %86 : tensor<64x1xi32>
    %88 = tt.splat %c_ptr : !tt.ptr<f32> -> tensor<64x1x!tt.ptr<f32>>
    %89 = tt.addptr %88, %87 : tensor<64x1x!tt.ptr<f32>>, tensor<64x1xi32>
    %90 = tt.broadcast %85 : tensor<1x64xi32> -> tensor<64x64xi32>
    %91 = tt.broadcast %89 : tensor<64x1x!tt.ptr<f32>> -> tensor<64x64x!tt.ptr<f32>>
    %92 = tt.addptr %91, %90 : tensor<64x64x!tt.ptr<f32>>, tensor<64x64xi32>
    %93 = tt.splat %M : i32 -> tensor<64x1xi32>
    %94 = tt.cmp "lt", %81, %93 : tensor<64x1xi32> -> tensor<64x1xi1>
    %95 = tt.splat %N : i32 -> tensor<1x64xi32>
    %96 = tt.cmp "lt", %85, %95 : tensor<1x64xi32> -> tensor<1x64xi1>
    %97 = tt.broadcast %94 : tensor<64x1xi1> -> tensor<64x64xi1>
    %98 = tt.broadcast %96 : tensor<1x64xi1> -> tensor<64x64xi1>
    %99 = tt.and %97, %98 : tensor<64x64xi1>
    tt.store %92, %5 mask %99 : tensor<64x64x!tt.ptr<f32>>, tensor<64x64xf32>, tensor<64x64xi1>
    %s1 = tt.broadcast %83 : tensor<1x64xi32> -> tensor<32x64xi32>
    %s2 = tt.splat %c_ptr : !tt.ptr<f32> -> tensor<32x64x!tt.ptr<f32>>
    %s3 = tt.addptr %s2, %s1 : tensor<32x64x!tt.ptr<f32>>, tensor<32x64xi32>
    tt.store %s3, %side_sum : tensor<32x64x!tt.ptr<f32>>, tensor<32x64xf32>
    func.return
  }
}