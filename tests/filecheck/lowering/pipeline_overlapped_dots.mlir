// tinyton-pipeline for sm_90a on a flash-attention kernel whose KV loop overlaps its two products (`Blocks.overlap`,
// as tinyton-flash-attention emits it for 64 queries, key blocks of 64, D = 64, 4 warps): each step issues this
// block's scores `q @ kᵀ` and the previous block's `p @ v`, and the softmax reads the scores while `p @ v` runs.
// Both dots become `tt.async_dot`; the scores are waited for with `tt.dot_wait 1` (one younger dot, `p @ v`, may
// still run) just before the scale reads them, `p @ v` with `tt.dot_wait 0` just before `alpha` rescales it; the
// loop yields only waited values, so the slots the next steps' copies overwrite are read by no running dot. The
// last `p @ v`, after the loop, waits for itself. Without wgmma (no arch) nothing changes.
// RUN: tinyton-opt %s -p 'tinyton-pipeline{arch="sm_90a"}' | filecheck %s
// RUN: tinyton-opt %s -p tinyton-pipeline | filecheck %s --check-prefix=SYNC

// CHECK:      scf.for
// CHECK:        tt.async_commit
// CHECK:        %[[S:.*]] = tt.dot %{{.*}}, %{{.*}}, %{{.*}} {tt.async_dot} : tensor<64x64xf16>, tensor<64x64xf16> -> tensor<64x64xf32>
// CHECK-NEXT:   %[[PV:.*]] = tt.dot %{{.*}}, %{{.*}}, %{{.*}} {tt.async_dot} : tensor<64x64xf16>, tensor<64x64xf16> -> tensor<64x64xf32>
// CHECK:        %[[SCORES:.*]] = tt.dot_wait %[[S]], 1 : tensor<64x64xf32>
// CHECK-NEXT:   tt.mul %[[SCORES]],
// CHECK:        tt.exp2
// CHECK:        %[[ACC:.*]] = tt.dot_wait %[[PV]], 0 : tensor<64x64xf32>
// CHECK-NEXT:   %[[RESCALED:.*]] = tt.mul %[[ACC]],
// CHECK:        scf.yield %{{.*}}, %{{.*}}, %[[RESCALED]],
// CHECK:      tt.async_wait 0
// CHECK:      tt.dot %{{.*}}, %{{.*}}, %{{.*}} : tensor<64x64xf16>, tensor<64x64xf16> -> tensor<64x64xf32>

// SYNC-NOT:   tt.async_dot
// SYNC-NOT:   tt.dot_wait

builtin.module attributes {tt.num_warps = 4 : i32, tt.overlap_prior_grid, tt.trigger_dependents} {
  func.func @attention_0_attention(%k: !tt.ptr<f16> {tt.divisibility = 16 : i32, tt.read_only}, %q: !tt.ptr<f16> {tt.divisibility = 16 : i32, tt.read_only}, %v: !tt.ptr<f16> {tt.divisibility = 16 : i32, tt.read_only}, %out0: !tt.ptr<f16> {tt.divisibility = 16 : i32}) {
    %0 = tt.constant 0 : i32 -> i32
    %1 = tt.program_id 1 : i32
    %2 = tt.program_id 0 : i32
    %3 = tt.constant 64 : i32 -> i32
    %4 = tt.mul %2, %3 : i32
    %5 = tt.splat %4 : i32 -> tensor<64x1xi32>
    %6 = tt.arange 0 to 64 : tensor<64xi32>
    %7 = tt.expand_dims %6 axis = 1 : tensor<64xi32> -> tensor<64x1xi32>
    %8 = tt.add %5, %7 : tensor<64x1xi32>
    %9 = tt.splat %3 : i32 -> tensor<64x1xi32>
    %10 = tt.cmp "lt", %8, %9 : tensor<64x1xi32> -> tensor<64x1xi1>
    %11 = tt.arange 0 to 64 : tensor<64xi32>
    %12 = tt.expand_dims %11 axis = 0 : tensor<64xi32> -> tensor<1x64xi32>
    %13 = tt.arange 0 to 64 : tensor<64xi32>
    %14 = tt.expand_dims %13 axis = 0 : tensor<64xi32> -> tensor<1x64xi32>
    %15 = tt.splat %0 : i32 -> tensor<1x1xi32>
    %16 = tt.mul %8, %9 : tensor<64x1xi32>
    %17 = tt.broadcast %15 : tensor<1x1xi32> -> tensor<64x1xi32>
    %18 = tt.add %17, %16 : tensor<64x1xi32>
    %19 = tt.broadcast %18 : tensor<64x1xi32> -> tensor<64x64xi32>
    %20 = tt.broadcast %12 : tensor<1x64xi32> -> tensor<64x64xi32>
    %21 = tt.add %19, %20 : tensor<64x64xi32>
    %22 = tt.splat %q : !tt.ptr<f16> -> tensor<64x64x!tt.ptr<f16>>
    %23 = tt.addptr %22, %21 : tensor<64x64x!tt.ptr<f16>>, tensor<64x64xi32>
    %24 = tt.constant 0.000000e+00 : f16 -> tensor<64x64xf16>
    %25 = tt.broadcast %10 : tensor<64x1xi1> -> tensor<64x64xi1>
    %26 = tt.load %23 mask %25 other %24 : tensor<64x64x!tt.ptr<f16>>, tensor<64x64xi1>, tensor<64x64xf16> -> tensor<64x64xf16>
    %27 = tt.constant 0.000000e+00 : f32 -> tensor<64x1xf32>
    %28 = tt.constant 0xff800000 : f32 -> tensor<64x1xf32>
    %29 = tt.constant 0.000000e+00 : f32 -> tensor<64x64xf32>
    %30 = tt.constant 128 : i32 -> i32
    %31, %32, %33, %34 = scf.for %35 = %0 to %30 step %3 iter_args(%36 = %28, %37 = %27, %38 = %29, %39 = %24) -> (tensor<64x1xf32>, tensor<64x1xf32>, tensor<64x64xf32>, tensor<64x64xf16>) : i32 {
      %40 = tt.splat %35 : i32 -> tensor<1x64xi32>
      %41 = tt.arange 0 to 64 : tensor<64xi32>
      %42 = tt.expand_dims %41 axis = 0 : tensor<64xi32> -> tensor<1x64xi32>
      %43 = tt.add %40, %42 : tensor<1x64xi32>
      %44 = tt.splat %35 : i32 -> tensor<64x1xi32>
      %45 = tt.arange 0 to 64 : tensor<64xi32>
      %46 = tt.expand_dims %45 axis = 1 : tensor<64xi32> -> tensor<64x1xi32>
      %47 = tt.add %44, %46 : tensor<64x1xi32>
      %48 = tt.arange 0 to 64 : tensor<64xi32>
      %49 = tt.expand_dims %48 axis = 0 : tensor<64xi32> -> tensor<1x64xi32>
      %50 = tt.constant 0 : i32 -> i32
      %51 = tt.splat %50 : i32 -> tensor<1x1xi32>
      %52 = tt.constant 64 : i32 -> i32
      %53 = tt.splat %52 : i32 -> tensor<64x1xi32>
      %54 = tt.mul %47, %53 : tensor<64x1xi32>
      %55 = tt.broadcast %51 : tensor<1x1xi32> -> tensor<64x1xi32>
      %56 = tt.add %55, %54 : tensor<64x1xi32>
      %57 = tt.broadcast %56 : tensor<64x1xi32> -> tensor<64x64xi32>
      %58 = tt.broadcast %49 : tensor<1x64xi32> -> tensor<64x64xi32>
      %59 = tt.add %57, %58 : tensor<64x64xi32>
      %60 = tt.splat %k : !tt.ptr<f16> -> tensor<64x64x!tt.ptr<f16>>
      %61 = tt.addptr %60, %59 : tensor<64x64x!tt.ptr<f16>>, tensor<64x64xi32>
      %62 = tt.load %61 : tensor<64x64x!tt.ptr<f16>> -> tensor<64x64xf16>
      %63 = tt.trans %62 {order = array<i32: 1, 0>} : tensor<64x64xf16> -> tensor<64x64xf16>
      %64 = tt.sub %35, %52 : i32
      %65 = tt.maximum %64, %50 : i32
      %66 = tt.splat %65 : i32 -> tensor<64x1xi32>
      %67 = tt.arange 0 to 64 : tensor<64xi32>
      %68 = tt.expand_dims %67 axis = 1 : tensor<64xi32> -> tensor<64x1xi32>
      %69 = tt.add %66, %68 : tensor<64x1xi32>
      %70 = tt.mul %69, %53 : tensor<64x1xi32>
      %71 = tt.add %55, %70 : tensor<64x1xi32>
      %72 = tt.broadcast %71 : tensor<64x1xi32> -> tensor<64x64xi32>
      %73 = tt.broadcast %14 : tensor<1x64xi32> -> tensor<64x64xi32>
      %74 = tt.add %72, %73 : tensor<64x64xi32>
      %75 = tt.splat %v : !tt.ptr<f16> -> tensor<64x64x!tt.ptr<f16>>
      %76 = tt.addptr %75, %74 : tensor<64x64x!tt.ptr<f16>>, tensor<64x64xi32>
      %77 = tt.load %76 : tensor<64x64x!tt.ptr<f16>> -> tensor<64x64xf16>
      %78 = tt.constant 0.000000e+00 : f32 -> tensor<64x64xf32>
      %79 = tt.dot %26, %63, %78 : tensor<64x64xf16>, tensor<64x64xf16> -> tensor<64x64xf32>
      %80 = tt.dot %39, %77, %38 : tensor<64x64xf16>, tensor<64x64xf16> -> tensor<64x64xf32>
      %81 = tt.constant 1.44269502 : f32 -> f32
      %82 = tt.splat %81 : f32 -> tensor<64x64xf32>
      %83 = tt.mul %79, %82 : tensor<64x64xf32>
      %84 = tt.reduce_max %83 axis = 1 : tensor<64x64xf32> -> tensor<64xf32>
      %85 = tt.expand_dims %84 axis = 1 : tensor<64xf32> -> tensor<64x1xf32>
      %86 = tt.maximum %36, %85 : tensor<64x1xf32>
      %87 = tt.constant 0xff800000 : f32 -> f32
      %88 = tt.splat %87 : f32 -> tensor<64x1xf32>
      %89 = tt.cmp "eq", %86, %88 : tensor<64x1xf32> -> tensor<64x1xi1>
      %90 = tt.constant 0.000000e+00 : f32 -> f32
      %91 = tt.splat %90 : f32 -> tensor<64x1xf32>
      %92 = tt.select %89, %91, %86 : tensor<64x1xi1>, tensor<64x1xf32>
      %93 = tt.broadcast %92 : tensor<64x1xf32> -> tensor<64x64xf32>
      %94 = tt.sub %83, %93 : tensor<64x64xf32>
      %95 = tt.exp2 %94 : tensor<64x64xf32>
      %96 = tt.sub %36, %92 : tensor<64x1xf32>
      %97 = tt.exp2 %96 : tensor<64x1xf32>
      %98 = tt.mul %37, %97 : tensor<64x1xf32>
      %99 = tt.reduce_sum %95 axis = 1 : tensor<64x64xf32> -> tensor<64xf32>
      %100 = tt.expand_dims %99 axis = 1 : tensor<64xf32> -> tensor<64x1xf32>
      %101 = tt.add %98, %100 : tensor<64x1xf32>
      %102 = tt.cast %95 : tensor<64x64xf32> -> tensor<64x64xf16>
      %103 = tt.broadcast %97 : tensor<64x1xf32> -> tensor<64x64xf32>
      %104 = tt.mul %80, %103 : tensor<64x64xf32>
      scf.yield %86, %101, %104, %102 : tensor<64x1xf32>, tensor<64x1xf32>, tensor<64x64xf32>, tensor<64x64xf16>
    } {tt.num_stages = 3 : i32}
    %105 = tt.arange 0 to 64 : tensor<64xi32>
    %106 = tt.expand_dims %105 axis = 1 : tensor<64xi32> -> tensor<64x1xi32>
    %107 = tt.add %9, %106 : tensor<64x1xi32>
    %108 = tt.mul %107, %9 : tensor<64x1xi32>
    %109 = tt.add %17, %108 : tensor<64x1xi32>
    %110 = tt.broadcast %109 : tensor<64x1xi32> -> tensor<64x64xi32>
    %111 = tt.broadcast %14 : tensor<1x64xi32> -> tensor<64x64xi32>
    %112 = tt.add %110, %111 : tensor<64x64xi32>
    %113 = tt.splat %v : !tt.ptr<f16> -> tensor<64x64x!tt.ptr<f16>>
    %114 = tt.addptr %113, %112 : tensor<64x64x!tt.ptr<f16>>, tensor<64x64xi32>
    %115 = tt.load %114 : tensor<64x64x!tt.ptr<f16>> -> tensor<64x64xf16>
    %116 = tt.dot %34, %115, %33 : tensor<64x64xf16>, tensor<64x64xf16> -> tensor<64x64xf32>
    %117 = tt.broadcast %32 : tensor<64x1xf32> -> tensor<64x64xf32>
    %118 = tt.div %116, %117 : tensor<64x64xf32>
    %119 = tt.cast %118 : tensor<64x64xf32> -> tensor<64x64xf16>
    %120 = tt.program_id 1 : i32
    %121 = tt.mul %120, %0 : i32
    %122 = tt.splat %121 : i32 -> tensor<1x1xi32>
    %123 = tt.mul %8, %9 : tensor<64x1xi32>
    %124 = tt.broadcast %122 : tensor<1x1xi32> -> tensor<64x1xi32>
    %125 = tt.add %124, %123 : tensor<64x1xi32>
    %126 = tt.broadcast %125 : tensor<64x1xi32> -> tensor<64x64xi32>
    %127 = tt.add %126, %111 : tensor<64x64xi32>
    %128 = tt.splat %out0 : !tt.ptr<f16> -> tensor<64x64x!tt.ptr<f16>>
    %129 = tt.addptr %128, %127 : tensor<64x64x!tt.ptr<f16>>, tensor<64x64xi32>
    tt.store %129, %119 mask %25 : tensor<64x64x!tt.ptr<f16>>, tensor<64x64xf16>, tensor<64x64xi1>
    func.return
  }
}