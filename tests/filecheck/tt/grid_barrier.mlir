// tt.grid_barrier round-trips (its verifier: tt/atomics_invalid.mlir).
// RUN: TT_ROUNDTRIP

// CHECK:      tt.grid_barrier %c, %l programs 32 : !tt.ptr<i32>
// CHECK-NEXT: func.return
func.func @ok(%c: !tt.ptr<i32>, %l: i1) {
  tt.grid_barrier %c, %l programs 32 : !tt.ptr<i32>
  func.return
}
