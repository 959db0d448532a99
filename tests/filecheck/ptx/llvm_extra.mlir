// The ops of tinyton.dialects.llvm_extra, printed generically as xDSL does.
// REQUIRES: mlir-tools
// RUN: mlir-translate --mlir-to-llvmir %s | filecheck %s --check-prefix=IR
// RUN: mlir-translate --mlir-to-llvmir %s | llc -mtriple=nvptx64-nvidia-cuda -mcpu=sm_90 -mattr=+ptx80 | filecheck %s

builtin.module {
  llvm.func @casts(%out: !llvm.ptr<1>, %x: f32, %u: i32) attributes {nvvm.kernel} {
    %s = "llvm.fptosi"(%x) : (f32) -> i32
    %z = "llvm.fptoui"(%x) : (f32) -> i32
    %f = "llvm.uitofp"(%u) : (i32) -> f32
    %g = "llvm.addrspacecast"(%out) : (!llvm.ptr<1>) -> !llvm.ptr
    %sum = llvm.add %s, %z : i32
    llvm.store %sum, %g {alignment = 4 : i64} : i32, !llvm.ptr
    %old = "llvm.atomicrmw"(%out, %f) <{bin_op = 11 : i64, ordering = 2 : i64}> : (!llvm.ptr<1>, f32) -> f32
    llvm.return
  }
}

// IR:      fptosi float %{{.*}} to i32
// IR:      fptoui float %{{.*}} to i32
// IR:      uitofp i32 %{{.*}} to float
// IR:      addrspacecast ptr addrspace(1) %{{.*}} to ptr
// IR:      atomicrmw fadd ptr addrspace(1) %{{.*}}, float %{{.*}} monotonic

// CHECK:   .visible .entry casts(
// CHECK-DAG: cvt.rzi.s32.f32
// CHECK-DAG: cvt.rzi.u32.f32
// CHECK-DAG: cvt.rn.f32.u32
// CHECK-DAG: st.global.b32
// CHECK-DAG: atom.global.add.f32
