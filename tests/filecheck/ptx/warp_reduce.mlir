// Row sum: a loop over block arguments, warp shuffles, shared memory and a barrier.
// REQUIRES: mlir-tools
// RUN: mlir-translate --mlir-to-llvmir %s | llc -mtriple=nvptx64-nvidia-cuda -mcpu=sm_90 -mattr=+ptx80 | filecheck %s
// RUN: %if ptxas %{ mlir-translate --mlir-to-llvmir %s | llc -mtriple=nvptx64-nvidia-cuda -mcpu=sm_90 -mattr=+ptx80 -o %t.ptx && ptxas -arch=sm_90 %t.ptx -o %t.cubin %}

builtin.module {
  llvm.mlir.global internal @partials() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<4 x f32>
  llvm.func @row_sum(%x: !llvm.ptr<1>, %out: !llvm.ptr<1>, %n: i32) attributes {nvvm.kernel, nvvm.maxntid = array<i32: 128, 1, 1>} {
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %row = nvvm.read.ptx.sreg.ctaid.x : i32
    %row_base = llvm.mul %row, %n : i32
    %zero = llvm.mlir.constant(0.000000e+00 : f32) : f32
    llvm.br ^loop(%tid, %zero : i32, f32)
  ^loop(%j: i32, %acc: f32):
    %more = llvm.icmp "slt" %j, %n : i32
    llvm.cond_br %more, ^body, ^done
  ^body:
    %idx = llvm.add %row_base, %j : i32
    %p = llvm.getelementptr inbounds %x[%idx] : (!llvm.ptr<1>, i32) -> !llvm.ptr<1>, f32
    %v = llvm.load %p {alignment = 4 : i64} : !llvm.ptr<1> -> f32
    %ntid = nvvm.read.ptx.sreg.ntid.x : i32
    %next = llvm.add %j, %ntid : i32
    %sum = llvm.fadd %acc, %v : f32
    llvm.br ^loop(%next, %sum : i32, f32)
  ^done:
    %mask = llvm.mlir.constant(-1 : i32) : i32
    %clamp = llvm.mlir.constant(31 : i32) : i32
    %c16 = llvm.mlir.constant(16 : i32) : i32
    %o16 = nvvm.shfl.sync bfly %mask, %acc, %c16, %clamp : f32 -> f32
    %s16 = llvm.fadd %acc, %o16 : f32
    %c1 = llvm.mlir.constant(1 : i32) : i32
    %o1 = nvvm.shfl.sync down %mask, %s16, %c1, %clamp : f32 -> f32
    %total = llvm.fadd %s16, %o1 : f32
    %lane = nvvm.read.ptx.sreg.laneid : i32
    %c5 = llvm.mlir.constant(5 : i32) : i32
    %warp = llvm.lshr %tid, %c5 : i32
    %smem = llvm.mlir.addressof @partials : !llvm.ptr<3>
    %slot = llvm.getelementptr %smem[0, %warp] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, !llvm.array<4 x f32>
    %c0 = llvm.mlir.constant(0 : i32) : i32
    %leader = llvm.icmp "eq" %lane, %c0 : i32
    llvm.cond_br %leader, ^write, ^sync
  ^write:
    llvm.store %total, %slot {alignment = 4 : i64} : f32, !llvm.ptr<3>
    llvm.br ^sync
  ^sync:
    nvvm.barrier0
    %first = llvm.icmp "eq" %tid, %c0 : i32
    llvm.cond_br %first, ^store, ^end
  ^store:
    %w0 = llvm.load %smem {alignment = 16 : i64} : !llvm.ptr<3> -> f32
    %dst = llvm.getelementptr inbounds %out[%row] : (!llvm.ptr<1>, i32) -> !llvm.ptr<1>, f32
    llvm.store %w0, %dst {alignment = 4 : i64} : f32, !llvm.ptr<1>
    llvm.br ^end
  ^end:
    llvm.return
  }
}

// CHECK:       .visible .entry row_sum(
// CHECK:       .maxntid 128, 1, 1
// CHECK:         .shared .align 16 .b8 partials[16];
// CHECK:         ld.global.b32
// CHECK:         shfl.sync.bfly.b32 {{.*}}, 16, 31, -1;
// CHECK:         shfl.sync.down.b32 {{.*}}, 1, 31, -1;
// CHECK:         st.shared.b32
// CHECK:         bar.sync 0;
// CHECK:         ld.shared.b32
