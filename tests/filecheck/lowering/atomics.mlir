// Atomics: one predicated PTX `atom` per lane with the op's ordering and scope, float max/min as integer
// atomics on the bits, old values shared with replica threads through shared memory; the debug barrier.
// RUN: tinyton-opt %s -p tinyton-to-llvm | filecheck %s
// REQUIRES: mlir-tools
// RUN: tinyton-opt %s -p tinyton-to-llvm | mlir-translate --mlir-to-llvmir | llc -mtriple=nvptx64-nvidia-cuda -mcpu=sm_90 -mattr=+ptx80 | filecheck %s --check-prefix=PTX
// RUN: %if ptxas %{ tinyton-opt %s -p tinyton-to-llvm | mlir-translate --mlir-to-llvmir | llc -mtriple=nvptx64-nvidia-cuda -mcpu=sm_90 -mattr=+ptx80 -o %t.ptx && ptxas -arch=sm_90 %t.ptx -o %t.cubin %}

// CHECK:      llvm.inline_asm has_side_effects "mov.b32 $0, 0;\0A\09@$3 atom.relaxed.cta.global.max.s32 $0, [ $1 + 0 ], $2;\0A\09@$4 atom.relaxed.cta.global.min.u32 $0, [ $1 + 0 ], $2;"
// CHECK:      llvm.inline_asm has_side_effects "mov.b32 $0, 0;\0A\09@$4 atom.acq_rel.gpu.global.cas.b32 $0, [ $1 + 0 ], $2, $3;"
// CHECK:      llvm.inline_asm has_side_effects "mov.b32 $0, 0;\0A\09@$3 atom.release.sys.global.xor.b32 $0, [ $1 + 0 ], $2;"
// CHECK:      nvvm.barrier0
// CHECK:      llvm.inline_asm has_side_effects "mov.b32 $0, 0;\0A\09@$3 atom.acquire.gpu.global.min.s32 $0, [ $1 + 0 ], $2;"
// CHECK:      llvm.inline_asm has_side_effects "mov.b16 $0, 0;\0A\09@$3 atom.acq_rel.gpu.global.add.noftz.f16 $0, [ $1 + 0 ], $2;"

// PTX:        atom.relaxed.cta.global.max.s32
// PTX:        atom.relaxed.cta.global.min.u32
// PTX:        bar.sync
// PTX:        atom.acq_rel.gpu.global.cas.b32
// PTX:        atom.release.sys.global.xor.b32
// PTX:        atom.acquire.gpu.global.min.s32
// PTX:        atom.acq_rel.gpu.global.add.noftz.f16
// PTX:        bar.sync

builtin.module attributes {tt.num_warps = 4 : i32} {
  func.func @atomics(%p: !tt.ptr<f32>, %q: !tt.ptr<i32>, %h: !tt.ptr<f16>, %v: f32) {
    %0 = tt.arange 0 to 64 : tensor<64xi32>
    %1 = tt.splat %p : !tt.ptr<f32> -> tensor<64x!tt.ptr<f32>>
    %2 = tt.addptr %1, %0 : tensor<64x!tt.ptr<f32>>, tensor<64xi32>
    %3 = tt.splat %v : f32 -> tensor<64xf32>
    %4 = tt.atomic_rmw "max", %2, %3 {sem = "relaxed", scope = "cta"} : tensor<64x!tt.ptr<f32>>, tensor<64xf32>
    tt.store %2, %4 : tensor<64x!tt.ptr<f32>>, tensor<64xf32>
    %5 = tt.atomic_cas %p, %v, %v {sem = "acq_rel", scope = "gpu"} : !tt.ptr<f32>, f32
    %c = tt.constant 3 : i32 -> i32
    %6 = tt.atomic_rmw "xor", %q, %c {sem = "release", scope = "sys"} : !tt.ptr<i32>, i32
    %7 = tt.atomic_rmw "min", %q, %6 {sem = "acquire", scope = "gpu"} : !tt.ptr<i32>, i32
    %hh = tt.cast %v : f32 -> f16
    %8 = tt.atomic_rmw "add", %h, %hh {sem = "acq_rel", scope = "gpu"} : !tt.ptr<f16>, f16
    tt.debug_barrier
    func.return
  }
}
