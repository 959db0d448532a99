// tinyton-pipeline for sm_90a on a flash-attention kernel whose KV loop overlaps its two products (`Blocks.overlap`,
// as tinyton-flash-attention emits it for 64 queries, key blocks of 32, D = 32, 4 warps): each step issues this
// block's scores `q @ kᵀ` and the previous block's `p @ v`, and the softmax reads the scores while `p @ v` runs.
// Both dots become `tt.async_dot`; the scores are waited for with `tt.dot_wait 1` (one younger dot, `p @ v`, may
// still run) just before the scale reads them, `p @ v` with `tt.dot_wait 0` just before `alpha` rescales it; the
// loop yields only waited values, so the slots the next steps' copies overwrite are read by no running dot. The
// last `p @ v`, after the loop, waits for itself. Without wgmma (no arch) nothing changes.
// RUN: tinyton-opt %s -p 'tinyton-pipeline{arch="sm_90a"}' | filecheck %s
// RUN: tinyton-opt %s -p tinyton-pipeline | filecheck %s --check-prefix=SYNC

// CHECK:      scf.for
// CHECK:        tt.async_commit
// CHECK:        %[[S:.*]] = tt.dot %{{.*}}, %{{.*}}, %{{.*}} {tt.async_dot} : tensor<64x32xf16>, tensor<32x32xf16> -> tensor<64x32xf32>
// CHECK-NEXT:   %[[PV:.*]] = tt.dot %{{.*}}, %{{.*}}, %{{.*}} {tt.async_dot} : tensor<64x32xf16>, tensor<32x32xf16> -> tensor<64x32xf32>
// CHECK:        %[[SCORES:.*]] = tt.dot_wait %[[S]], 1 : tensor<64x32xf32>
// CHECK-NEXT:   tt.mul %[[SCORES]],
// CHECK:        tt.exp2
// CHECK:        %[[ACC:.*]] = tt.dot_wait %[[PV]], 0 : tensor<64x32xf32>
// CHECK-NEXT:   %[[RESCALED:.*]] = tt.mul %[[ACC]],
// CHECK:        scf.yield %{{.*}}, %{{.*}}, %[[RESCALED]],
// CHECK:      tt.async_wait 0
// CHECK:      tt.dot %{{.*}}, %{{.*}}, %{{.*}} : tensor<64x32xf16>, tensor<32x32xf16> -> tensor<64x32xf32>

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
    %11 = tt.arange 0 to 32 : tensor<32xi32>
    %12 = tt.expand_dims %11 axis = 0 : tensor<32xi32> -> tensor<1x32xi32>
    %13 = tt.arange 0 to 32 : tensor<32xi32>
    %14 = tt.expand_dims %13 axis = 0 : tensor<32xi32> -> tensor<1x32xi32>
    %15 = tt.splat %0 : i32 -> tensor<1x1xi32>
    %16 = tt.constant 32 : i32 -> i32
    %17 = tt.splat %16 : i32 -> tensor<64x1xi32>
    %18 = tt.mul %8, %17 : tensor<64x1xi32>
    %19 = tt.broadcast %15 : tensor<1x1xi32> -> tensor<64x1xi32>
    %20 = tt.add %19, %18 : tensor<64x1xi32>
    %21 = tt.broadcast %20 : tensor<64x1xi32> -> tensor<64x32xi32>
    %22 = tt.broadcast %12 : tensor<1x32xi32> -> tensor<64x32xi32>
    %23 = tt.add %21, %22 : tensor<64x32xi32>
    %24 = tt.splat %q : !tt.ptr<f16> -> tensor<64x32x!tt.ptr<f16>>
    %25 = tt.addptr %24, %23 : tensor<64x32x!tt.ptr<f16>>, tensor<64x32xi32>
    %26 = tt.constant 0.000000e+00 : f16 -> tensor<64x32xf16>
    %27 = tt.broadcast %10 : tensor<64x1xi1> -> tensor<64x32xi1>
    %28 = tt.load %25 mask %27 other %26 : tensor<64x32x!tt.ptr<f16>>, tensor<64x32xi1>, tensor<64x32xf16> -> tensor<64x32xf16>
    %29 = tt.constant 0.000000e+00 : f32 -> tensor<64x1xf32>
    %30 = tt.constant 0xff800000 : f32 -> tensor<64x1xf32>
    %31 = tt.constant 0.000000e+00 : f32 -> tensor<64x32xf32>
    %32 = tt.constant 128 : i32 -> i32
    %33, %34, %35, %36 = scf.for %37 = %0 to %32 step %16 iter_args(%38 = %30, %39 = %29, %40 = %31, %41 = %26) -> (tensor<64x1xf32>, tensor<64x1xf32>, tensor<64x32xf32>, tensor<64x32xf16>) : i32 {
      %42 = tt.splat %37 : i32 -> tensor<1x32xi32>
      %43 = tt.arange 0 to 32 : tensor<32xi32>
      %44 = tt.expand_dims %43 axis = 0 : tensor<32xi32> -> tensor<1x32xi32>
      %45 = tt.add %42, %44 : tensor<1x32xi32>
      %46 = tt.splat %37 : i32 -> tensor<32x1xi32>
      %47 = tt.arange 0 to 32 : tensor<32xi32>
      %48 = tt.expand_dims %47 axis = 1 : tensor<32xi32> -> tensor<32x1xi32>
      %49 = tt.add %46, %48 : tensor<32x1xi32>
      %50 = tt.arange 0 to 32 : tensor<32xi32>
      %51 = tt.expand_dims %50 axis = 0 : tensor<32xi32> -> tensor<1x32xi32>
      %52 = tt.constant 0 : i32 -> i32
      %53 = tt.splat %52 : i32 -> tensor<1x1xi32>
      %54 = tt.constant 32 : i32 -> i32
      %55 = tt.splat %54 : i32 -> tensor<32x1xi32>
      %56 = tt.mul %49, %55 : tensor<32x1xi32>
      %57 = tt.broadcast %53 : tensor<1x1xi32> -> tensor<32x1xi32>
      %58 = tt.add %57, %56 : tensor<32x1xi32>
      %59 = tt.broadcast %58 : tensor<32x1xi32> -> tensor<32x32xi32>
      %60 = tt.broadcast %51 : tensor<1x32xi32> -> tensor<32x32xi32>
      %61 = tt.add %59, %60 : tensor<32x32xi32>
      %62 = tt.splat %k : !tt.ptr<f16> -> tensor<32x32x!tt.ptr<f16>>
      %63 = tt.addptr %62, %61 : tensor<32x32x!tt.ptr<f16>>, tensor<32x32xi32>
      %64 = tt.load %63 : tensor<32x32x!tt.ptr<f16>> -> tensor<32x32xf16>
      %65 = tt.trans %64 {order = array<i32: 1, 0>} : tensor<32x32xf16> -> tensor<32x32xf16>
      %66 = tt.sub %37, %54 : i32
      %67 = tt.maximum %66, %52 : i32
      %68 = tt.splat %67 : i32 -> tensor<32x1xi32>
      %69 = tt.arange 0 to 32 : tensor<32xi32>
      %70 = tt.expand_dims %69 axis = 1 : tensor<32xi32> -> tensor<32x1xi32>
      %71 = tt.add %68, %70 : tensor<32x1xi32>
      %72 = tt.mul %71, %55 : tensor<32x1xi32>
      %73 = tt.add %57, %72 : tensor<32x1xi32>
      %74 = tt.broadcast %73 : tensor<32x1xi32> -> tensor<32x32xi32>
      %75 = tt.broadcast %14 : tensor<1x32xi32> -> tensor<32x32xi32>
      %76 = tt.add %74, %75 : tensor<32x32xi32>
      %77 = tt.splat %v : !tt.ptr<f16> -> tensor<32x32x!tt.ptr<f16>>
      %78 = tt.addptr %77, %76 : tensor<32x32x!tt.ptr<f16>>, tensor<32x32xi32>
      %79 = tt.load %78 : tensor<32x32x!tt.ptr<f16>> -> tensor<32x32xf16>
      %80 = tt.constant 0.000000e+00 : f32 -> tensor<64x32xf32>
      %81 = tt.dot %28, %65, %80 : tensor<64x32xf16>, tensor<32x32xf16> -> tensor<64x32xf32>
      %82 = tt.dot %41, %79, %40 : tensor<64x32xf16>, tensor<32x32xf16> -> tensor<64x32xf32>
      %83 = tt.constant 1.44269502 : f32 -> f32
      %84 = tt.splat %83 : f32 -> tensor<64x32xf32>
      %85 = tt.mul %81, %84 : tensor<64x32xf32>
      %86 = tt.reduce_max %85 axis = 1 : tensor<64x32xf32> -> tensor<64xf32>
      %87 = tt.expand_dims %86 axis = 1 : tensor<64xf32> -> tensor<64x1xf32>
      %88 = tt.maximum %38, %87 : tensor<64x1xf32>
      %89 = tt.constant 0xff800000 : f32 -> f32
      %90 = tt.splat %89 : f32 -> tensor<64x1xf32>
      %91 = tt.cmp "eq", %88, %90 : tensor<64x1xf32> -> tensor<64x1xi1>
      %92 = tt.constant 0.000000e+00 : f32 -> f32
      %93 = tt.splat %92 : f32 -> tensor<64x1xf32>
      %94 = tt.select %91, %93, %88 : tensor<64x1xi1>, tensor<64x1xf32>
      %95 = tt.broadcast %94 : tensor<64x1xf32> -> tensor<64x32xf32>
      %96 = tt.sub %85, %95 : tensor<64x32xf32>
      %97 = tt.exp2 %96 : tensor<64x32xf32>
      %98 = tt.sub %38, %94 : tensor<64x1xf32>
      %99 = tt.exp2 %98 : tensor<64x1xf32>
      %100 = tt.mul %39, %99 : tensor<64x1xf32>
      %101 = tt.reduce_sum %97 axis = 1 : tensor<64x32xf32> -> tensor<64xf32>
      %102 = tt.expand_dims %101 axis = 1 : tensor<64xf32> -> tensor<64x1xf32>
      %103 = tt.add %100, %102 : tensor<64x1xf32>
      %104 = tt.cast %97 : tensor<64x32xf32> -> tensor<64x32xf16>
      %105 = tt.broadcast %99 : tensor<64x1xf32> -> tensor<64x32xf32>
      %106 = tt.mul %82, %105 : tensor<64x32xf32>
      scf.yield %88, %103, %106, %104 : tensor<64x1xf32>, tensor<64x1xf32>, tensor<64x32xf32>, tensor<64x32xf16>
    } {tt.num_stages = 3 : i32}
    %107 = tt.constant 96 : i32 -> i32
    %108 = tt.splat %107 : i32 -> tensor<32x1xi32>
    %109 = tt.arange 0 to 32 : tensor<32xi32>
    %110 = tt.expand_dims %109 axis = 1 : tensor<32xi32> -> tensor<32x1xi32>
    %111 = tt.add %108, %110 : tensor<32x1xi32>
    %112 = tt.splat %16 : i32 -> tensor<32x1xi32>
    %113 = tt.mul %111, %112 : tensor<32x1xi32>
    %114 = tt.broadcast %15 : tensor<1x1xi32> -> tensor<32x1xi32>
    %115 = tt.add %114, %113 : tensor<32x1xi32>
    %116 = tt.broadcast %115 : tensor<32x1xi32> -> tensor<32x32xi32>
    %117 = tt.broadcast %14 : tensor<1x32xi32> -> tensor<32x32xi32>
    %118 = tt.add %116, %117 : tensor<32x32xi32>
    %119 = tt.splat %v : !tt.ptr<f16> -> tensor<32x32x!tt.ptr<f16>>
    %120 = tt.addptr %119, %118 : tensor<32x32x!tt.ptr<f16>>, tensor<32x32xi32>
    %121 = tt.load %120 : tensor<32x32x!tt.ptr<f16>> -> tensor<32x32xf16>
    %122 = tt.dot %36, %121, %35 : tensor<64x32xf16>, tensor<32x32xf16> -> tensor<64x32xf32>
    %123 = tt.broadcast %34 : tensor<64x1xf32> -> tensor<64x32xf32>
    %124 = tt.div %122, %123 : tensor<64x32xf32>
    %125 = tt.cast %124 : tensor<64x32xf32> -> tensor<64x32xf16>
    %126 = tt.program_id 1 : i32
    %127 = tt.mul %126, %0 : i32
    %128 = tt.splat %127 : i32 -> tensor<1x1xi32>
    %129 = tt.mul %8, %17 : tensor<64x1xi32>
    %130 = tt.broadcast %128 : tensor<1x1xi32> -> tensor<64x1xi32>
    %131 = tt.add %130, %129 : tensor<64x1xi32>
    %132 = tt.broadcast %131 : tensor<64x1xi32> -> tensor<64x32xi32>
    %133 = tt.broadcast %14 : tensor<1x32xi32> -> tensor<64x32xi32>
    %134 = tt.add %132, %133 : tensor<64x32xi32>
    %135 = tt.splat %out0 : !tt.ptr<f16> -> tensor<64x32x!tt.ptr<f16>>
    %136 = tt.addptr %135, %134 : tensor<64x32x!tt.ptr<f16>>, tensor<64x32xi32>
    tt.store %136, %125 mask %27 : tensor<64x32x!tt.ptr<f16>>, tensor<64x32xf16>, tensor<64x32xi1>
    func.return
  }
}