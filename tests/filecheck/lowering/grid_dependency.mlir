// tinyton-grid-dependency: the wait goes before the first op that may not run while the launch before is still
// running (here the load of %x, which an earlier kernel of the program writes); the prologue's loads through `tt.read_only` parameters (%g, and %w's first K step, carried into the loop) move above
// the wait with the pure ops computing their pointers. The bias load after the loop stays: its registers would
// be live across the loop. Lowered: `griddepcontrol.wait`.
// RUN: tinyton-opt %s -p tinyton-grid-dependency | filecheck %s
// RUN: tinyton-opt %s -p tinyton-grid-dependency,tinyton-to-llvm | filecheck %s --check-prefix=LLVM
// REQUIRES: mlir-tools
// RUN: %if ptxas %{ tinyton-opt %s -p tinyton-grid-dependency,tinyton-to-llvm | mlir-translate --mlir-to-llvmir | llc -mtriple=nvptx64-nvidia-cuda -mcpu=sm_90 -mattr=+ptx80 -o %t.ptx && ptxas -arch=sm_90 %t.ptx -o %t.cubin %}

// CHECK:      func.func @gemv(%x: !tt.ptr<f32>, %g: !tt.ptr<f32> {tt.read_only}, %w: !tt.ptr<f32> {tt.read_only}, %b: !tt.ptr<f32> {tt.read_only}, %out: !tt.ptr<f32>)
// CHECK:      %[[G:.+]] = tt.splat %g
// CHECK:      tt.load %{{.+}} : tensor<128x!tt.ptr<f32>> -> tensor<128xf32>
// CHECK:      %[[W:.+]] = tt.splat %w
// CHECK:      %[[W0:.+]] = tt.load %{{.+}} : tensor<128x!tt.ptr<f32>> -> tensor<128xf32>
// CHECK-NEXT: tt.grid_dependency_wait
// CHECK-NEXT: tt.splat %x
// CHECK:      scf.for {{.+}} iter_args({{.+}} = %[[W0]])
// CHECK:      }
// CHECK:      tt.splat %b
// CHECK:      tt.load
// CHECK:      tt.store

// LLVM:       llvm.inline_asm has_side_effects "ld.global.b32
// LLVM:       llvm.inline_asm has_side_effects "ld.global.b32
// LLVM-NOT:   ld.global
// LLVM:       llvm.inline_asm has_side_effects "griddepcontrol.wait;", "~{memory}"
// LLVM-NEXT:  llvm.getelementptr
// LLVM-NEXT:  llvm.inline_asm has_side_effects "ld.global.b32

builtin.module attributes {tt.num_warps = 4 : i32} {
  func.func @gemv(%x: !tt.ptr<f32>, %g: !tt.ptr<f32> {tt.read_only}, %w: !tt.ptr<f32> {tt.read_only}, %b: !tt.ptr<f32> {tt.read_only}, %out: !tt.ptr<f32>) {
    %0 = tt.arange 0 to 128 : tensor<128xi32>
    %1 = tt.splat %x : !tt.ptr<f32> -> tensor<128x!tt.ptr<f32>>
    %2 = tt.addptr %1, %0 : tensor<128x!tt.ptr<f32>>, tensor<128xi32>
    %3 = tt.load %2 : tensor<128x!tt.ptr<f32>> -> tensor<128xf32>
    %4 = tt.splat %g : !tt.ptr<f32> -> tensor<128x!tt.ptr<f32>>
    %5 = tt.addptr %4, %0 : tensor<128x!tt.ptr<f32>>, tensor<128xi32>
    %6 = tt.load %5 : tensor<128x!tt.ptr<f32>> -> tensor<128xf32>
    %7 = tt.mul %3, %6 : tensor<128xf32>
    %8 = tt.splat %w : !tt.ptr<f32> -> tensor<128x!tt.ptr<f32>>
    %9 = tt.addptr %8, %0 : tensor<128x!tt.ptr<f32>>, tensor<128xi32>
    %10 = tt.load %9 : tensor<128x!tt.ptr<f32>> -> tensor<128xf32>
    %lo = tt.constant 0 : i32 -> i32
    %hi = tt.constant 4 : i32 -> i32
    %one = tt.constant 1 : i32 -> i32
    %zero = tt.constant 0.0 : f32 -> tensor<128xf32>
    %acc, %next = scf.for %i = %lo to %hi step %one iter_args(%a = %zero, %wi = %10) -> (tensor<128xf32>, tensor<128xf32>) : i32 {
      %s = tt.constant 128 : i32 -> i32
      %k = tt.mul %i, %s : i32
      %kk = tt.add %k, %s : i32
      %ks = tt.splat %kk : i32 -> tensor<128xi32>
      %o = tt.add %ks, %0 : tensor<128xi32>
      %p = tt.addptr %8, %o : tensor<128x!tt.ptr<f32>>, tensor<128xi32>
      %wn = tt.load %p : tensor<128x!tt.ptr<f32>> -> tensor<128xf32>
      %m = tt.mul %7, %wi : tensor<128xf32>
      %a2 = tt.add %a, %m : tensor<128xf32>
      scf.yield %a2, %wn : tensor<128xf32>, tensor<128xf32>
    }
    %11 = tt.splat %b : !tt.ptr<f32> -> tensor<128x!tt.ptr<f32>>
    %12 = tt.addptr %11, %0 : tensor<128x!tt.ptr<f32>>, tensor<128xi32>
    %13 = tt.load %12 : tensor<128x!tt.ptr<f32>> -> tensor<128xf32>
    %14 = tt.add %acc, %13 : tensor<128xf32>
    %15 = tt.splat %out : !tt.ptr<f32> -> tensor<128x!tt.ptr<f32>>
    %16 = tt.addptr %15, %0 : tensor<128x!tt.ptr<f32>>, tensor<128xi32>
    tt.store %16, %14 : tensor<128x!tt.ptr<f32>>, tensor<128xf32>
    func.return
  }
}

