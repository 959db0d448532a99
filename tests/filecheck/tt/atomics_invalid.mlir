// The verifiers of tt.atomic_rmw, tt.atomic_cas and tt.grid_barrier.
// RUN: tinyton-opt %s --verify-diagnostics --split-input-file | filecheck %s

func.func @bad_kind(%p: !tt.ptr<i32>, %v: i32) {
  %0 = tt.atomic_rmw "nand", %p, %v {sem = "relaxed", scope = "gpu"} : !tt.ptr<i32>, i32
  func.return
}
// CHECK: kind must be one of add, max, min, and, or, xor, xchg, got 'nand'

// -----

func.func @bad_sem(%p: !tt.ptr<i32>, %v: i32) {
  %0 = tt.atomic_rmw "add", %p, %v {sem = "seq_cst", scope = "gpu"} : !tt.ptr<i32>, i32
  func.return
}
// CHECK: sem must be one of relaxed, acquire, release, acq_rel, got 'seq_cst'

// -----

func.func @bad_scope(%p: !tt.ptr<i32>, %v: i32) {
  %0 = tt.atomic_cas %p, %v, %v {sem = "relaxed", scope = "cluster"} : !tt.ptr<i32>, i32
  func.return
}
// CHECK: scope must be one of gpu, cta, sys, got 'cluster'

// -----

func.func @bitwise_float(%p: !tt.ptr<f32>, %v: f32) {
  %0 = tt.atomic_rmw "xor", %p, %v {sem = "relaxed", scope = "gpu"} : !tt.ptr<f32>, f32
  func.return
}
// CHECK: atomic xor needs integers, got f32

// -----

func.func @wrong_value_type(%p: !tt.ptr<f32>, %v: i32) {
  %0 = tt.atomic_rmw "add", %p, %v {sem = "relaxed", scope = "gpu"} : !tt.ptr<f32>, i32
  func.return
}
// CHECK: val must be f32, got i32

// -----

func.func @grid_barrier_f32_counter(%c: !tt.ptr<f32>, %l: i1) {
  tt.grid_barrier %c, %l programs 4 : !tt.ptr<f32>
  func.return
}
// CHECK: tt.grid_barrier needs a scalar !tt.ptr<i32>, got !tt.ptr<f32>
