// tt.grid_barrier: bar.sync, thread 0 arrives with atom.add.release.gpu (the leader adds 2**31 - (programs - 1),
// here 2**31 - 7, the others 1) and spins on ld.acquire.gpu until bit 31 of the counter flips, bar.sync. Two
// barriers in one kernel assemble (the asm's labels and registers are local to its braces).
// RUN: tinyton-opt %s -p tinyton-to-llvm | filecheck %s
// REQUIRES: mlir-tools
// RUN: tinyton-opt %s -p tinyton-to-llvm | mlir-translate --mlir-to-llvmir | llc -mtriple=nvptx64-nvidia-cuda -mcpu=sm_90 -mattr=+ptx80 | filecheck %s --check-prefix=PTX
// RUN: %if ptxas %{ tinyton-opt %s -p tinyton-to-llvm | mlir-translate --mlir-to-llvmir | llc -mtriple=nvptx64-nvidia-cuda -mcpu=sm_90 -mattr=+ptx80 -o %t.ptx && ptxas -arch=sm_90 %t.ptx -o %t.cubin %}

// CHECK:      llvm.inline_asm has_side_effects "ld.global.b32
// CHECK:      nvvm.barrier0
// CHECK-NEXT: llvm.inline_asm has_side_effects "{{.*}}selp.u32 %gb_r1, 2147483641, 1, $1;{{.*}}atom.add.release.gpu.global.u32 %gb_r2, [$0], %gb_r1;{{.*}}GB_SPIN:{{.*}}ld.acquire.gpu.global.u32 %gb_r3, [$0];{{.*}}", "l,b" %{{.+}}, %{{.+}} : (!llvm.ptr<1>, i1) -> ()
// CHECK-NEXT: nvvm.barrier0
// CHECK:      llvm.inline_asm has_side_effects "st.global.b32
// CHECK:      nvvm.barrier0
// CHECK-NEXT: llvm.inline_asm has_side_effects "{{.*}}atom.add.release.gpu
// CHECK-NEXT: nvvm.barrier0

// PTX:        bar.sync 0;
// PTX:        selp.u32 %gb_r1, 2147483641, 1, %p
// PTX:        atom.add.release.gpu.global.u32
// PTX:        GB_SPIN:
// PTX-NEXT:   ld.acquire.gpu.global.u32
// PTX:        bar.sync 0;
// PTX:        st.global
// PTX:        atom.add.release.gpu.global.u32

builtin.module attributes {tt.num_warps = 4 : i32} {
  func.func @grid_barrier(%p: !tt.ptr<f32>, %c: !tt.ptr<i32>) {
    %0 = tt.arange 0 to 128 : tensor<128xi32>
    %1 = tt.splat %p : !tt.ptr<f32> -> tensor<128x!tt.ptr<f32>>
    %2 = tt.addptr %1, %0 : tensor<128x!tt.ptr<f32>>, tensor<128xi32>
    %3 = tt.load %2 : tensor<128x!tt.ptr<f32>> -> tensor<128xf32>
    %pid = tt.program_id 0 : i32
    %z = tt.constant 0 : i32 -> i32
    %lead = tt.cmp "eq", %pid, %z : i32 -> i1
    tt.grid_barrier %c, %lead programs 8 : !tt.ptr<i32>
    tt.store %2, %3 : tensor<128x!tt.ptr<f32>>, tensor<128xf32>
    tt.grid_barrier %c, %lead programs 8 : !tt.ptr<i32>
    func.return
  }
}
