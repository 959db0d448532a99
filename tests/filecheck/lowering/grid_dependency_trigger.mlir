// tinyton-grid-dependency in a module marked `tt.trigger_dependents`: the kernel lets the next launch start
// right after its main loop (its last top-level scf.for), before its epilogue's loads and stores; the wait is
// placed as without the mark. Lowered: `griddepcontrol.launch_dependents`.
// RUN: tinyton-opt %s -p tinyton-grid-dependency | filecheck %s
// RUN: tinyton-opt %s -p tinyton-grid-dependency,tinyton-to-llvm | filecheck %s --check-prefix=LLVM

// CHECK:      tt.grid_dependency_wait
// CHECK:      scf.for
// CHECK:      }
// CHECK-NEXT: tt.launch_dependents
// CHECK-NEXT: tt.splat %out
// CHECK:      tt.store

// LLVM:       "griddepcontrol.wait;"
// LLVM:       "griddepcontrol.launch_dependents;"
// LLVM:       st.global

builtin.module attributes {tt.num_warps = 4 : i32, tt.trigger_dependents} {
  func.func @sum_rows(%x: !tt.ptr<f32>, %out: !tt.ptr<f32>) {
    %0 = tt.arange 0 to 128 : tensor<128xi32>
    %1 = tt.splat %x : !tt.ptr<f32> -> tensor<128x!tt.ptr<f32>>
    %lo = tt.constant 0 : i32 -> i32
    %hi = tt.constant 4 : i32 -> i32
    %one = tt.constant 1 : i32 -> i32
    %zero = tt.constant 0.0 : f32 -> tensor<128xf32>
    %acc = scf.for %i = %lo to %hi step %one iter_args(%a = %zero) -> (tensor<128xf32>) : i32 {
      %s = tt.constant 128 : i32 -> i32
      %k = tt.mul %i, %s : i32
      %ks = tt.splat %k : i32 -> tensor<128xi32>
      %o = tt.add %ks, %0 : tensor<128xi32>
      %p = tt.addptr %1, %o : tensor<128x!tt.ptr<f32>>, tensor<128xi32>
      %v = tt.load %p : tensor<128x!tt.ptr<f32>> -> tensor<128xf32>
      %a2 = tt.add %a, %v : tensor<128xf32>
      scf.yield %a2 : tensor<128xf32>
    }
    %2 = tt.splat %out : !tt.ptr<f32> -> tensor<128x!tt.ptr<f32>>
    %3 = tt.addptr %2, %0 : tensor<128x!tt.ptr<f32>>, tensor<128xi32>
    tt.store %3, %acc : tensor<128x!tt.ptr<f32>>, tensor<128xf32>
    func.return
  }
}
