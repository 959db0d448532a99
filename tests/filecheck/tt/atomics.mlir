// tt.atomic_rmw / tt.atomic_cas / tt.debug_barrier round-trip.
// RUN: TT_ROUNDTRIP

// CHECK:      %{{.*}} = tt.atomic_rmw "add", %{{.*}}, %{{.*}} mask %{{.*}} {sem = "relaxed", scope = "cta"} : tensor<64x!tt.ptr<f32>>, tensor<64xf32>, tensor<64xi1>
// CHECK-NEXT: %{{.*}} = tt.atomic_cas %p, %v, %v {sem = "acq_rel", scope = "gpu"} : !tt.ptr<f32>, f32
// CHECK-NEXT: tt.debug_barrier
func.func @ok(%p: !tt.ptr<f32>, %v: f32) {
  %0 = tt.arange 0 to 64 : tensor<64xi32>
  %1 = tt.splat %p : !tt.ptr<f32> -> tensor<64x!tt.ptr<f32>>
  %2 = tt.addptr %1, %0 : tensor<64x!tt.ptr<f32>>, tensor<64xi32>
  %3 = tt.splat %v : f32 -> tensor<64xf32>
  %m = tt.constant true -> tensor<64xi1>
  %4 = tt.atomic_rmw "add", %2, %3 mask %m {sem = "relaxed", scope = "cta"} : tensor<64x!tt.ptr<f32>>, tensor<64xf32>, tensor<64xi1>
  %5 = tt.atomic_cas %p, %v, %v {sem = "acq_rel", scope = "gpu"} : !tt.ptr<f32>, f32
  tt.debug_barrier
  func.return
}

