// Kernel marking, special registers and 128-bit predicated accesses as inline asm.
// REQUIRES: mlir-tools
// RUN: mlir-translate --mlir-to-llvmir %s | llc -mtriple=nvptx64-nvidia-cuda -mcpu=sm_90 -mattr=+ptx80 | filecheck %s
// RUN: %if ptxas %{ mlir-translate --mlir-to-llvmir %s | llc -mtriple=nvptx64-nvidia-cuda -mcpu=sm_90 -mattr=+ptx80 -o %t.ptx && ptxas -arch=sm_90 %t.ptx -o %t.cubin %}

builtin.module {
  llvm.func @vadd4(%a: !llvm.ptr<1>, %b: !llvm.ptr<1>, %c: !llvm.ptr<1>, %n: i32) attributes {nvvm.kernel, nvvm.reqntid = array<i32: 128, 1, 1>} {
    %ctaid = nvvm.read.ptx.sreg.ctaid.x : i32
    %ntid = nvvm.read.ptx.sreg.ntid.x : i32
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %base = llvm.mul %ctaid, %ntid : i32
    %thread = llvm.add %base, %tid : i32
    %four = llvm.mlir.constant(4 : i32) : i32
    %first = llvm.mul %thread, %four : i32
    %pred = llvm.icmp "slt" %first, %n : i32
    %pa = llvm.getelementptr inbounds %a[%first] : (!llvm.ptr<1>, i32) -> !llvm.ptr<1>, f32
    %va = llvm.inline_asm has_side_effects "mov.b32 $0, 0;\0A\09mov.b32 $1, 0;\0A\09mov.b32 $2, 0;\0A\09mov.b32 $3, 0;\0A\09@$5 ld.global.v4.b32 {$0, $1, $2, $3}, [$4];", "=r,=r,=r,=r,l,b" %pa, %pred : (!llvm.ptr<1>, i1) -> !llvm.struct<(i32, i32, i32, i32)>
    %a0 = llvm.extractvalue %va[0] : !llvm.struct<(i32, i32, i32, i32)>
    %a3 = llvm.extractvalue %va[3] : !llvm.struct<(i32, i32, i32, i32)>
    %f0 = llvm.bitcast %a0 : i32 to f32
    %f3 = llvm.bitcast %a3 : i32 to f32
    %s = llvm.fadd %f0, %f3 : f32
    %r = llvm.bitcast %s : f32 to i32
    %pc = llvm.getelementptr inbounds %c[%first] : (!llvm.ptr<1>, i32) -> !llvm.ptr<1>, f32
    llvm.inline_asm has_side_effects "@$5 st.global.v4.b32 [$4], {$0, $1, $2, $3};", "r,r,r,r,l,b" %r, %r, %r, %r, %pc, %pred : (i32, i32, i32, i32, !llvm.ptr<1>, i1) -> ()
    llvm.return
  }
}

// CHECK:       .visible .entry vadd4(
// CHECK-NEXT:    .param .u64 .ptr .global .align 1 vadd4_param_0,
// CHECK:       .reqntid 128, 1, 1
// CHECK-DAG:     mov.u32 {{.*}}, %ctaid.x;
// CHECK-DAG:     mov.u32 {{.*}}, %tid.x;
// CHECK:         setp.lt.s32 [[P:%p[0-9]+]],
// CHECK:         @[[P]] ld.global.v4.b32 {%r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}}}, [%rd{{[0-9]+}}];
// CHECK:         add.rn.f32
// CHECK:         @[[P]] st.global.v4.b32 [%rd{{[0-9]+}}], {
// CHECK:         ret;
