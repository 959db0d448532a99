// RUN: tinyton-opt %s -p tinyton-fuse,tinyton-fusion-to-kernels | filecheck %s
// RUN: tinyton-opt %s -p 'tinyton-fuse,tinyton-fusion-to-kernels{sm_count=1}' | filecheck %s --check-prefix=BUSY

// Flash-decoding: one query row per head, 2 heads, a 1000-key cache (16 key blocks of 64) on a GPU of 132
// SMs (the nominal H100 without a GPU). Two programs would leave it idle, so the KV loop is split into 8
// chunks of 128 keys (two key blocks each, `CHUNK_MIN_BLOCKS`): each program (grid z = chunk) stores its
// chunk's row max, sum and unnormalised accumulator, then counts itself in at its row block's counter (a
// barrier, an acq_rel atomic); the one that counts last sets the counter back to 0, loads the 8 chunks' partials
// at once (past L1), then rescales and sums them in chunk order, unrolled. One launch. On a GPU of one SM the 2
// programs are enough: no split.

func.func @decode(%q: tensor<2x1x64xf32>, %k: tensor<2x1000x64xf32>, %v: tensor<2x1000x64xf32>) -> tensor<2x1x64xf32> {
  %kt = tta.transpose %k permutation = [0, 2, 1] : tensor<2x1000x64xf32> -> tensor<2x64x1000xf32>
  %qk = tta.matmul %q, %kt : tensor<2x1x64xf32>, tensor<2x64x1000xf32> -> tensor<2x1x1000xf32>
  %c = tta.constant 0.125 : f32 -> f32
  %s = tta.mul %qk, %c : tensor<2x1x1000xf32>, f32 -> tensor<2x1x1000xf32>
  %m = tta.reduce_max %s axis = 2 keepdims : tensor<2x1x1000xf32> -> tensor<2x1x1xf32>
  %d = tta.sub %s, %m : tensor<2x1x1000xf32>, tensor<2x1x1xf32> -> tensor<2x1x1000xf32>
  %e = tta.exp %d : tensor<2x1x1000xf32>
  %l = tta.reduce_sum %e axis = 2 keepdims : tensor<2x1x1000xf32> -> tensor<2x1x1xf32>
  %p = tta.div %e, %l : tensor<2x1x1000xf32>, tensor<2x1x1xf32> -> tensor<2x1x1000xf32>
  %o = tta.matmul %p, %v : tensor<2x1x1000xf32>, tensor<2x1000x64xf32> -> tensor<2x1x64xf32>
  func.return %o : tensor<2x1x64xf32>
}

// CHECK:       tta.fusion "attention"(%k, %q, %v) {kernel = "decode_0_attention"}
// CHECK-LABEL: builtin.module @decode_0_attention attributes {tt.num_warps = 4 : i32, tinyton.grid = array<i64: 1, 2, 8>}
// CHECK-NEXT:    func.func @decode_0_attention(%k: !tt.ptr<f32> {{.*}}, %q: !tt.ptr<f32> {{.*}}, %v: !tt.ptr<f32> {{.*}}, %out0: !tt.ptr<f32> {{.*}}, %partial0: !tt.ptr<f32> {{.*}}, %partial1: !tt.ptr<f32> {{.*}}, %partial2: !tt.ptr<f32> {{.*}}, %counter: !tt.ptr<i32> {{.*}})
// CHECK:           %[[CHUNK:.+]] = tt.program_id 2 : i32
// CHECK:           %[[LB:.+]] = tt.mul %[[CHUNK]], %{{.+}} : i32
// CHECK:           %[[END:.+]] = tt.minimum %{{.+}}, %{{.+}} : i32
// CHECK:           %[[MID:.+]] = tt.maximum %{{.+}}, %[[LB]] : i32
// CHECK:           scf.for %{{.+}} = %[[LB]] to %[[MID]] step
// CHECK:             tt.exp2
// CHECK:           scf.for %{{.+}} = %[[MID]] to %[[END]] step
// CHECK:             tt.select
// CHECK:             tt.exp2
// CHECK:           tt.program_id 2 : i32
// CHECK:           tt.store %{{.+}} mask %{{.+}} : tensor<16x1x!tt.ptr<f32>>, tensor<16x1xf32>
// CHECK:           tt.store %{{.+}} mask %{{.+}} : tensor<16x1x!tt.ptr<f32>>, tensor<16x1xf32>
// CHECK:           tt.store %{{.+}} mask %{{.+}} : tensor<16x64x!tt.ptr<f32>>, tensor<16x64xf32>
// CHECK:           %[[SLOT:.+]] = tt.addptr %counter, %{{.+}} : !tt.ptr<i32>, i32
// CHECK-NEXT:      tt.debug_barrier
// CHECK-NEXT:      %[[OLD:.+]] = tt.atomic_rmw "add", %[[SLOT]], %{{.+}} {sem = "acq_rel", scope = "gpu"} : !tt.ptr<i32>, i32
// CHECK-NEXT:      %[[LAST:.+]] = tt.constant 7 : i32
// CHECK-NEXT:      %[[IS_LAST:.+]] = tt.cmp "eq", %[[OLD]], %[[LAST]] : i32
// CHECK-NEXT:      scf.if %[[IS_LAST]] {
// CHECK-NEXT:        %[[ZERO:.+]] = tt.constant 0 : i32
// CHECK-NEXT:        tt.store %[[SLOT]], %[[ZERO]] : !tt.ptr<i32>, i32
// CHECK-NOT:         scf.for
// CHECK:             tt.load %{{.+}} mask %{{.+}} other %{{.+}} {cache = ".cg"} : tensor<16x1x!tt.ptr<f32>>
// CHECK-COUNT-8:     tt.load %{{.+}} mask %{{.+}} other %{{.+}} {cache = ".cg"} : tensor<16x64x!tt.ptr<f32>>
// CHECK-NOT:         tt.load
// CHECK:             tt.maximum %{{.+}} : tensor<16x1xf32>
// CHECK:             tt.exp2 %{{.+}} : tensor<16x1xf32>
// CHECK:             tt.exp2 %{{.+}} : tensor<16x1xf32>
// CHECK-NOT:         tt.load
// CHECK:             tt.div
// CHECK:             tt.store %{{.+}} mask %{{.+}} : tensor<16x64x!tt.ptr<f32>>, tensor<16x64xf32>
// CHECK-NEXT:      } else {
// CHECK-NEXT:      }
// CHECK-NEXT:      func.return
// CHECK-NOT:   builtin.module

// BUSY:       tta.fusion "attention"(%k, %q, %v) {kernel = "decode_0_attention"}
// BUSY:       builtin.module @decode_0_attention attributes {tt.num_warps = 4 : i32, tinyton.grid = array<i64: 1, 2, 1>}
// BUSY-NOT:   tt.program_id 2
// BUSY-NOT:   builtin.module
