// Programmatic dependent launch: an sm_90 kernel begins with `griddepcontrol.wait` (its predecessor in the
// stream has completed) and `griddepcontrol.launch_dependents` (the kernel after it may be placed); with no
// arch, an sm_80 target or `overlap=false` it has neither (nor with a grid barrier: grid_barrier.mlir).
// RUN: tinyton-opt %s -p 'tinyton-to-llvm{arch=sm_90}' | filecheck %s
// RUN: tinyton-opt %s -p 'tinyton-to-llvm{arch=sm_80}' | filecheck %s --check-prefix=NONE
// RUN: tinyton-opt %s -p 'tinyton-to-llvm{arch=sm_90 overlap=false}' | filecheck %s --check-prefix=NONE
// RUN: tinyton-opt %s -p tinyton-to-llvm | filecheck %s --check-prefix=NONE
// REQUIRES: mlir-tools
// RUN: tinyton-opt %s -p 'tinyton-to-llvm{arch=sm_90}' | mlir-translate --mlir-to-llvmir | llc -mtriple=nvptx64-nvidia-cuda -mcpu=sm_90 -mattr=+ptx80 | filecheck %s --check-prefix=PTX
// RUN: %if ptxas %{ tinyton-opt %s -p 'tinyton-to-llvm{arch=sm_90}' | mlir-translate --mlir-to-llvmir | llc -mtriple=nvptx64-nvidia-cuda -mcpu=sm_90 -mattr=+ptx80 -o %t.ptx && ptxas -arch=sm_90 %t.ptx -o %t.cubin %}

// CHECK:      llvm.func @copy(
// CHECK:      llvm.inline_asm has_side_effects "griddepcontrol.wait;", "" : () -> ()
// CHECK-NEXT: llvm.inline_asm has_side_effects "griddepcontrol.launch_dependents;", "" : () -> ()
// CHECK:      ld.global
// NONE-NOT:   griddepcontrol

// PTX:        .entry copy(
// PTX:        griddepcontrol.wait;
// PTX:        griddepcontrol.launch_dependents;
// PTX:        ld.global

builtin.module attributes {tt.num_warps = 1 : i32} {
  func.func @copy(%src: !tt.ptr<f32>, %dst: !tt.ptr<f32>) {
    %r = tt.arange 0 to 32 : tensor<32xi32>
    %ps = tt.splat %src : !tt.ptr<f32> -> tensor<32x!tt.ptr<f32>>
    %p = tt.addptr %ps, %r : tensor<32x!tt.ptr<f32>>, tensor<32xi32>
    %x = tt.load %p : tensor<32x!tt.ptr<f32>> -> tensor<32xf32>
    %qs = tt.splat %dst : !tt.ptr<f32> -> tensor<32x!tt.ptr<f32>>
    %q = tt.addptr %qs, %r : tensor<32x!tt.ptr<f32>>, tensor<32xi32>
    tt.store %q, %x : tensor<32x!tt.ptr<f32>>, tensor<32xf32>
    func.return
  }
}
