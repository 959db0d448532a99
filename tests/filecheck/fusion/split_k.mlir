// RUN: tinyton-opt %s -p 'tinyton-fuse,tinyton-fusion-to-kernels{split_k=4}' | filecheck %s

// Split-K (lowering/fusion/split_k.py): a decode batch's projection (8 rows, 64 columns, K 256) is one 16 x 64
// tile; with its K cut in 4 ranges it has 4 programs. Each runs its range of the K loop, stores its f32
// partial product and counts itself in at the tile's counter (a barrier, an acq_rel atomic); the program that
// counts last sets the counter back to 0, adds the 4 ranges' partials in range order (loads past L1) and runs
// the epilogue (the residual) and the store, inside the branch.

func.func @projection(%x: tensor<8x256xbf16>, %w: tensor<64x256xbf16>, %r: tensor<8x64xf32>) -> tensor<8x64xf32> {
  %wt = tta.transpose %w permutation = [1, 0] : tensor<64x256xbf16> -> tensor<256x64xbf16>
  %p = tta.matmul %x, %wt : tensor<8x256xbf16>, tensor<256x64xbf16> -> tensor<8x64xbf16>
  %pf = tta.cast %p : tensor<8x64xbf16> -> tensor<8x64xf32>
  %y = tta.add %pf, %r : tensor<8x64xf32>, tensor<8x64xf32> -> tensor<8x64xf32>
  func.return %y : tensor<8x64xf32>
}

// CHECK-LABEL: builtin.module @projection_0_matmul_epilogue attributes {{{.*}}tinyton.grid = array<i64: 4, 1, 1>}
// CHECK-NEXT:    func.func @projection_0_matmul_epilogue({{.*}}, %out0: !tt.ptr<f32> {{.*}}, %partial0: !tt.ptr<f32> {{.*}}, %counter: !tt.ptr<i32> {{.*}})
// CHECK:           %[[RANGE:.+]] = tt.program_id 0 : i32
// CHECK:           %[[LB:.+]] = tt.mul %[[RANGE]], %{{.+}} : i32
// CHECK-NEXT:      %[[END:.+]] = tt.add %[[LB]], %{{.+}} : i32
// CHECK-NEXT:      %[[UB:.+]] = tt.minimum %[[END]], %{{.+}} : i32
// CHECK:           %[[ACC:.+]] = scf.for %{{.+}} = %[[LB]] to %[[UB]] step
// CHECK:             tt.dot
// CHECK:           } {tt.num_stages = 3 : i32}
// CHECK:           tt.store %{{.+}}, %[[ACC]] : tensor<16x64x!tt.ptr<f32>>, tensor<16x64xf32>
// CHECK-NEXT:      %[[SLOT:.+]] = tt.addptr %counter, %{{.+}} : !tt.ptr<i32>, i32
// CHECK-NEXT:      tt.debug_barrier
// CHECK:           %[[OLD:.+]] = tt.atomic_rmw "add", %[[SLOT]], %{{.+}} {sem = "acq_rel", scope = "gpu"}
// CHECK:           %[[LAST:.+]] = tt.constant 3 : i32
// CHECK:           %[[IS_LAST:.+]] = tt.cmp "eq", %[[OLD]], %[[LAST]] : i32 -> i1
// CHECK-NEXT:      scf.if %[[IS_LAST]] {
// CHECK:             %[[ZERO:.+]] = tt.constant 0 : i32
// CHECK:             tt.store %[[SLOT]], %[[ZERO]] : !tt.ptr<i32>, i32
// CHECK-COUNT-4:     tt.load %{{.+}} {cache = ".cg"} : tensor<16x64x!tt.ptr<f32>> -> tensor<16x64xf32>
// CHECK-COUNT-3:     tt.add %{{.+}} : tensor<16x64xf32>
// CHECK:             tt.cast %{{.+}} : tensor<16x64xf32> -> tensor<16x64xbf16>
// CHECK:             tt.load %{{.+}} mask %{{.+}} : tensor<16x64x!tt.ptr<f32>>, tensor<16x64xi1> -> tensor<16x64xf32>
// CHECK:             tt.store %{{.+}} : tensor<16x64x!tt.ptr<f32>>, tensor<16x64xf32>, tensor<16x64xi1>
// CHECK-NEXT:      } else {
// CHECK-NEXT:      }
// CHECK-NEXT:      func.return
