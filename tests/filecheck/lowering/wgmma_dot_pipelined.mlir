// The pipelined K loop of mma_dot_pipelined.mlir lowered for sm_90a: the dot becomes warpgroup MMA. The
// cp.async pipeline is the same; each tt.async_wait fences the async proxy (wgmma reads shared memory
// through it) before its barrier; per iteration wgmma.fence, one m64n64k16 per 16-deep step of K (two
// for BLOCK_K = 32), commit, and a wait_group 1 that takes and gives back the 32 accumulators: the dot
// stays in flight while the next iteration waits for its copies (the slots advance modulo 4, one more
// than the stages); wait_group 0 after the loop, before the accumulators are stored. The
// descriptors: A (64x32 fp16, 64-byte rows) 64-byte swizzle (mode 2 at bit 62), LBO 1, SBO 512 bytes;
// B (32x64, 128-byte rows) 128-byte swizzle (mode 1), LBO one panel (4096 bytes), SBO 1024 bytes.
// REQUIRES: mlir-tools
// RUN: tinyton-opt %s -p 'tinyton-to-llvm{arch="sm_90a"}' | filecheck %s --check-prefix=LLVM
// RUN: tinyton-opt %s -p 'tinyton-to-llvm{arch="sm_90a"}' | mlir-opt --convert-nvvm-to-llvm | mlir-translate --mlir-to-llvmir | llc -mtriple=nvptx64-nvidia-cuda -mcpu=sm_90a -mattr=+ptx80 | filecheck %s --check-prefix=PTX
// RUN: %if ptxas %{ tinyton-opt %s -p 'tinyton-to-llvm{arch="sm_90a"}' | mlir-opt --convert-nvvm-to-llvm | mlir-translate --mlir-to-llvmir | llc -mtriple=nvptx64-nvidia-cuda -mcpu=sm_90a -mattr=+ptx80 -o %t.ptx && ptxas -arch=sm_90a %t.ptx -o %t.cubin %}

// LLVM-DAG:  %[[A_BITS:.*]] = llvm.mlir.constant(-9223371899415756800) : i64
// LLVM-DAG:  %[[B_BITS:.*]] = llvm.mlir.constant(4611686293322072064) : i64
// LLVM-DAG:  %[[LAST_SLOT:.*]] = llvm.mlir.constant(3 : i32) : i32
// LLVM:      ^bb1(
// LLVM:      llvm.call_intrinsic "llvm.nvvm.cp.async.wait.group"(%{{.*}}) : (i32) -> ()
// LLVM-NEXT: llvm.call_intrinsic "llvm.nvvm.fence.proxy.async.shared_cta"() : () -> ()
// LLVM-NEXT: nvvm.barrier0
// LLVM-NOT:  ldmatrix
// LLVM:      nvvm.wgmma.fence.aligned
// LLVM:      llvm.or %{{.*}}, %[[A_BITS]] : i64
// LLVM:      llvm.or %{{.*}}, %[[B_BITS]] : i64
// LLVM-NEXT: llvm.inline_asm has_side_effects "{{.*}}add.s64 da, $32, 0;{{.*}}add.s64 db, $33, 0;{{.*}}wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {$0, {{.*}}, $31}, da, db, p, 1, 1, 0, 1;{{.*}}", "=f,{{.*}},=f,l,l,r,0,1,{{.*}},31"
// LLVM:      llvm.inline_asm has_side_effects "{{.*}}wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16
// LLVM-NOT:  wgmma.mma_async
// LLVM:      nvvm.wgmma.commit.group.sync.aligned
// LLVM-NEXT: llvm.inline_asm has_side_effects "wgmma.wait_group.sync.aligned 1;"
// LLVM:      llvm.icmp "eq" %{{.*}}, %[[LAST_SLOT]] : i32
// LLVM:      llvm.br ^bb1
// LLVM:      llvm.inline_asm has_side_effects "wgmma.wait_group.sync.aligned 0;"
// LLVM-NOT:  wgmma
// LLVM:      st.global

// PTX:       .target sm_90a
// PTX:       cp.async.wait_group 1;
// PTX-NEXT:  fence.proxy.async.shared::cta;
// PTX-NEXT:  bar.sync 0;
// PTX:       wgmma.fence.sync.aligned;
// PTX:       wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16
// PTX:       wgmma.commit_group.sync.aligned;
// PTX:       wgmma.wait_group.sync.aligned 1;
// PTX:       bra
// PTX:       wgmma.wait_group.sync.aligned 0;
// PTX:       st.global

builtin.module attributes {tt.num_warps = 4 : i32, tt.num_stages = 3 : i32} {
  func.func @matmul_f16(%a_ptr: !tt.ptr<f16> {tt.divisibility = 16 : i32}, %b_ptr: !tt.ptr<f16> {tt.divisibility = 16 : i32}, %c_ptr: !tt.ptr<f32> {tt.divisibility = 16 : i32}, %M: i32 {tt.divisibility = 16 : i32}, %N: i32 {tt.divisibility = 16 : i32}, %K: i32 {tt.divisibility = 16 : i32}) {
    %0 = tt.program_id 0 : i32
    %1 = tt.constant 64 : i32 -> i32
    %2 = tt.mul %0, %1 : i32
    %3 = tt.arange 0 to 64 : tensor<64xi32>
    %4 = tt.splat %2 : i32 -> tensor<64xi32>
    %5 = tt.add %4, %3 : tensor<64xi32>
    %6 = tt.program_id 1 : i32
    %7 = tt.mul %6, %1 : i32
    %8 = tt.splat %7 : i32 -> tensor<64xi32>
    %9 = tt.add %8, %3 : tensor<64xi32>
    %10 = tt.arange 0 to 32 : tensor<32xi32>
    %11 = tt.expand_dims %5 axis = 1 : tensor<64xi32> -> tensor<64x1xi32>
    %12 = tt.splat %K : i32 -> tensor<64x1xi32>
    %13 = tt.mul %11, %12 : tensor<64x1xi32>
    %14 = tt.splat %a_ptr : !tt.ptr<f16> -> tensor<64x1x!tt.ptr<f16>>
    %15 = tt.addptr %14, %13 : tensor<64x1x!tt.ptr<f16>>, tensor<64x1xi32>
    %16 = tt.expand_dims %10 axis = 0 : tensor<32xi32> -> tensor<1x32xi32>
    %17 = tt.broadcast %16 : tensor<1x32xi32> -> tensor<64x32xi32>
    %18 = tt.broadcast %15 : tensor<64x1x!tt.ptr<f16>> -> tensor<64x32x!tt.ptr<f16>>
    %19 = tt.addptr %18, %17 : tensor<64x32x!tt.ptr<f16>>, tensor<64x32xi32>
    %20 = tt.expand_dims %10 axis = 1 : tensor<32xi32> -> tensor<32x1xi32>
    %21 = tt.splat %N : i32 -> tensor<32x1xi32>
    %22 = tt.mul %20, %21 : tensor<32x1xi32>
    %23 = tt.splat %b_ptr : !tt.ptr<f16> -> tensor<32x1x!tt.ptr<f16>>
    %24 = tt.addptr %23, %22 : tensor<32x1x!tt.ptr<f16>>, tensor<32x1xi32>
    %25 = tt.expand_dims %9 axis = 0 : tensor<64xi32> -> tensor<1x64xi32>
    %26 = tt.broadcast %25 : tensor<1x64xi32> -> tensor<32x64xi32>
    %27 = tt.broadcast %24 : tensor<32x1x!tt.ptr<f16>> -> tensor<32x64x!tt.ptr<f16>>
    %28 = tt.addptr %27, %26 : tensor<32x64x!tt.ptr<f16>>, tensor<32x64xi32>
    %29 = tt.constant 0.000000e+00 : f32 -> tensor<64x64xf32>
    %30 = tt.constant 0 : i32 -> i32
    %31 = tt.constant 32 : i32 -> i32
    %32, %33, %34 = scf.for %35 = %30 to %K step %31 iter_args(%36 = %19, %37 = %29, %38 = %28) -> (tensor<64x32x!tt.ptr<f16>>, tensor<64x64xf32>, tensor<32x64x!tt.ptr<f16>>) : i32 {
      %39 = tt.splat %M : i32 -> tensor<64x1xi32>
      %40 = tt.cmp "lt", %11, %39 : tensor<64x1xi32> -> tensor<64x1xi1>
      %41 = tt.splat %35 : i32 -> tensor<1x32xi32>
      %42 = tt.add %41, %16 : tensor<1x32xi32>
      %43 = tt.splat %K : i32 -> tensor<1x32xi32>
      %44 = tt.cmp "lt", %42, %43 : tensor<1x32xi32> -> tensor<1x32xi1>
      %45 = tt.broadcast %40 : tensor<64x1xi1> -> tensor<64x32xi1>
      %46 = tt.broadcast %44 : tensor<1x32xi1> -> tensor<64x32xi1>
      %47 = tt.and %45, %46 : tensor<64x32xi1>
      %48 = tt.constant 0.000000e+00 : f16 -> tensor<64x32xf16>
      %49 = tt.load %36 mask %47 other %48 : tensor<64x32x!tt.ptr<f16>>, tensor<64x32xi1>, tensor<64x32xf16> -> tensor<64x32xf16>
      %50 = tt.splat %35 : i32 -> tensor<32x1xi32>
      %51 = tt.add %50, %20 : tensor<32x1xi32>
      %52 = tt.splat %K : i32 -> tensor<32x1xi32>
      %53 = tt.cmp "lt", %51, %52 : tensor<32x1xi32> -> tensor<32x1xi1>
      %54 = tt.splat %N : i32 -> tensor<1x64xi32>
      %55 = tt.cmp "lt", %25, %54 : tensor<1x64xi32> -> tensor<1x64xi1>
      %56 = tt.broadcast %53 : tensor<32x1xi1> -> tensor<32x64xi1>
      %57 = tt.broadcast %55 : tensor<1x64xi1> -> tensor<32x64xi1>
      %58 = tt.and %56, %57 : tensor<32x64xi1>
      %59 = tt.constant 0.000000e+00 : f16 -> tensor<32x64xf16>
      %60 = tt.load %38 mask %58 other %59 : tensor<32x64x!tt.ptr<f16>>, tensor<32x64xi1>, tensor<32x64xf16> -> tensor<32x64xf16>
      %61 = tt.dot %49, %60, %37 : tensor<64x32xf16>, tensor<32x64xf16> -> tensor<64x64xf32>
      %62 = tt.constant 32 : i32 -> tensor<64x32xi32>
      %63 = tt.addptr %36, %62 : tensor<64x32x!tt.ptr<f16>>, tensor<64x32xi32>
      %64 = tt.mul %31, %N : i32
      %65 = tt.splat %64 : i32 -> tensor<32x64xi32>
      %66 = tt.addptr %38, %65 : tensor<32x64x!tt.ptr<f16>>, tensor<32x64xi32>
      scf.yield %63, %61, %66 : tensor<64x32x!tt.ptr<f16>>, tensor<64x64xf32>, tensor<32x64x!tt.ptr<f16>>
    }
    %67 = tt.splat %N : i32 -> tensor<64x1xi32>
    %68 = tt.mul %11, %67 : tensor<64x1xi32>
    %69 = tt.splat %c_ptr : !tt.ptr<f32> -> tensor<64x1x!tt.ptr<f32>>
    %70 = tt.addptr %69, %68 : tensor<64x1x!tt.ptr<f32>>, tensor<64x1xi32>
    %71 = tt.broadcast %25 : tensor<1x64xi32> -> tensor<64x64xi32>
    %72 = tt.broadcast %70 : tensor<64x1x!tt.ptr<f32>> -> tensor<64x64x!tt.ptr<f32>>
    %73 = tt.addptr %72, %71 : tensor<64x64x!tt.ptr<f32>>, tensor<64x64xi32>
    %74 = tt.splat %M : i32 -> tensor<64x1xi32>
    %75 = tt.cmp "lt", %11, %74 : tensor<64x1xi32> -> tensor<64x1xi1>
    %76 = tt.splat %N : i32 -> tensor<1x64xi32>
    %77 = tt.cmp "lt", %25, %76 : tensor<1x64xi32> -> tensor<1x64xi1>
    %78 = tt.broadcast %75 : tensor<64x1xi1> -> tensor<64x64xi1>
    %79 = tt.broadcast %77 : tensor<1x64xi1> -> tensor<64x64xi1>
    %80 = tt.and %78, %79 : tensor<64x64xi1>
    tt.store %73, %33 mask %80 : tensor<64x64x!tt.ptr<f32>>, tensor<64x64xf32>, tensor<64x64xi1>
    func.return
  }
}