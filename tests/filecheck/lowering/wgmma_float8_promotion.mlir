// The float8 dot of wgmma_float8.mlir with `max_num_imprecise_acc = 32` in a pipelined loop: the pipeliner
// leaves it in flight as a `tt.promoted_dot` whose second chain (each of the two k32 steps of the 64-deep tile
// is a chain: a fresh partial, scale-d false, no tied accumulator inputs) is carried to the next iteration.
// An iteration: `wait_group 0` for the chain carried in (ptxas serialises every wgmma, C7514, when registers a
// wgmma wrote before the loop's back edge are read after any other wait), the first chain, the carried chain's
// 32 registers (m64n64: N / 2 per thread) added to the f32 accumulator by `add.f32` while it runs (the CUDA
// cores' full f32: Hopper's float8 wgmma keeps ~13 fraction bits of its sum), the second chain, `wait_group 1`
// (the first is done) and its adds. After the loop: `tt.dot_wait 0` and the last chain's adds.
// REQUIRES: mlir-tools
// RUN: tinyton-opt %s -p 'tinyton-pipeline{arch="sm_90a"}' | filecheck %s --check-prefix=PIPE
// RUN: tinyton-opt %s -p 'tinyton-to-llvm{arch="sm_90a"}' | filecheck %s --check-prefix=LLVM
// RUN: tinyton-opt %s -p 'tinyton-to-llvm{arch="sm_90a"}' | mlir-opt --convert-nvvm-to-llvm | mlir-translate --mlir-to-llvmir | llc -mtriple=nvptx64-nvidia-cuda -mcpu=sm_90a -mattr=+ptx80 | filecheck %s --check-prefix=PTX
// RUN: %if ptxas %{ tinyton-opt %s -p 'tinyton-to-llvm{arch="sm_90a"}' | mlir-opt --convert-nvvm-to-llvm | mlir-translate --mlir-to-llvmir | llc -mtriple=nvptx64-nvidia-cuda -mcpu=sm_90a -mattr=+ptx80 -o %t.ptx && ptxas -arch=sm_90a %t.ptx -o %t.cubin %}
// RUN: tinyton-opt %s | filecheck %s --check-prefix=ROUNDTRIP
// RUN: tinyton-opt %s -p 'tinyton-pipeline{arch="sm_90a"}' | tinyton-opt | filecheck %s --check-prefix=PIPE

// ROUNDTRIP: tt.dot %{{.*}}, %{{.*}}, %{{.*}} max_num_imprecise_acc = 32 : tensor<64x64xf8E4M3FN>, tensor<64x64xf8E5M2> -> tensor<64x64xf32>

// PIPE:      %{{[0-9]+}} = tt.constant 0.000000e+00 : f32 -> tensor<64x64xf32>
// PIPE:      %[[ZERO:[0-9]+]] = tt.constant 0.000000e+00 : f32 -> tensor<64x64xf32>
// PIPE:      %[[SUMS:[0-9]+]], %[[CHAINS:[0-9]+]], {{.*}} = scf.for {{.*}} iter_args(%[[ACC:[0-9]+]] = %{{[0-9]+}}, %[[PENDING:[0-9]+]] = %[[ZERO]], {{.*}}) -> (tensor<64x64xf32>, tensor<64x64xf32>, i32, i32)
// PIPE:        %[[SUM:[0-9]+]], %[[RUNNING:[0-9]+]] = tt.promoted_dot %{{[0-9]+}}, %{{[0-9]+}}, %[[ACC]], %[[PENDING]] max_num_imprecise_acc = 32
// PIPE:        scf.yield %[[SUM]], %[[RUNNING]], {{.*}}
// PIPE:      tt.async_wait 0
// PIPE-NEXT: %[[LAST:[0-9]+]] = tt.dot_wait %[[CHAINS]], 0
// PIPE-NEXT: tt.add %[[SUMS]], %[[LAST]]
// PIPE-NOT:  tt.dot

// LLVM:          ^bb2:
// LLVM:          llvm.inline_asm has_side_effects "wgmma.wait_group.sync.aligned 0;"
// LLVM:          nvvm.wgmma.fence.aligned
// LLVM:          llvm.inline_asm has_side_effects {{.*}}wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e5m2 {{.*}}, p, 1, 1;{{.*}}", "{{(=f,)+}}l,l,r"
// LLVM:          nvvm.wgmma.commit.group.sync.aligned
// LLVM-COUNT-32: llvm.fadd
// LLVM:          nvvm.wgmma.fence.aligned
// LLVM:          llvm.inline_asm has_side_effects {{.*}}wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e5m2 {{.*}}", "{{(=f,)+}}l,l,r"
// LLVM:          nvvm.wgmma.commit.group.sync.aligned
// LLVM-NEXT:     llvm.inline_asm has_side_effects "wgmma.wait_group.sync.aligned 1;"
// LLVM-COUNT-32: llvm.fadd
// LLVM-NOT:      wgmma.mma_async
// LLVM:          llvm.inline_asm has_side_effects "wgmma.wait_group.sync.aligned 0;"
// LLVM-COUNT-32: llvm.fadd
// LLVM-NOT:      wgmma.mma_async
// LLVM-NOT:      wgmma.wait_group

// PTX:           wgmma.wait_group.sync.aligned 0;
// PTX:           wgmma.fence.sync.aligned;
// PTX:           wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e5m2
// PTX:           wgmma.commit_group.sync.aligned;
// PTX-COUNT-32:  add.rn.f32
// PTX:           wgmma.fence.sync.aligned;
// PTX:           wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e5m2
// PTX:           wgmma.commit_group.sync.aligned;
// PTX:           wgmma.wait_group.sync.aligned 1;
// PTX-COUNT-32:  add.rn.f32
// PTX:           wgmma.wait_group.sync.aligned 0;
// PTX-COUNT-32:  add.rn.f32
// PTX-NOT:       wgmma.mma_async

builtin.module attributes {tt.num_warps = 4 : i32} {
  func.func @fp8_matmul(%a_ptr: !tt.ptr<f8E4M3FN> {tt.divisibility = 16 : i32}, %b_ptr: !tt.ptr<f8E5M2> {tt.divisibility = 16 : i32}, %c_ptr: !tt.ptr<f32> {tt.divisibility = 16 : i32}, %M: i32 {tt.divisibility = 16 : i32}, %N: i32 {tt.divisibility = 16 : i32}, %K: i32 {tt.divisibility = 16 : i32}) {
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
    %10 = tt.constant 0.000000e+00 : f32 -> tensor<64x64xf32>
    %11 = tt.constant 0 : i32 -> i32
    %12 = scf.for %13 = %11 to %K step %1 iter_args(%14 = %10) -> (tensor<64x64xf32>) : i32 {
      %15 = tt.expand_dims %5 axis = 1 : tensor<64xi32> -> tensor<64x1xi32>
      %16 = tt.splat %K : i32 -> tensor<64x1xi32>
      %17 = tt.mul %15, %16 : tensor<64x1xi32>
      %18 = tt.splat %a_ptr : !tt.ptr<f8E4M3FN> -> tensor<64x1x!tt.ptr<f8E4M3FN>>
      %19 = tt.addptr %18, %17 : tensor<64x1x!tt.ptr<f8E4M3FN>>, tensor<64x1xi32>
      %20 = tt.expand_dims %3 axis = 0 : tensor<64xi32> -> tensor<1x64xi32>
      %21 = tt.splat %13 : i32 -> tensor<1x64xi32>
      %22 = tt.add %21, %20 : tensor<1x64xi32>
      %23 = tt.broadcast %22 : tensor<1x64xi32> -> tensor<64x64xi32>
      %24 = tt.broadcast %19 : tensor<64x1x!tt.ptr<f8E4M3FN>> -> tensor<64x64x!tt.ptr<f8E4M3FN>>
      %25 = tt.addptr %24, %23 : tensor<64x64x!tt.ptr<f8E4M3FN>>, tensor<64x64xi32>
      %26 = tt.splat %M : i32 -> tensor<64x1xi32>
      %27 = tt.cmp "lt", %15, %26 : tensor<64x1xi32> -> tensor<64x1xi1>
      %28 = tt.splat %K : i32 -> tensor<1x64xi32>
      %29 = tt.cmp "lt", %22, %28 : tensor<1x64xi32> -> tensor<1x64xi1>
      %30 = tt.broadcast %27 : tensor<64x1xi1> -> tensor<64x64xi1>
      %31 = tt.broadcast %29 : tensor<1x64xi1> -> tensor<64x64xi1>
      %32 = tt.and %30, %31 : tensor<64x64xi1>
      %33 = tt.constant 0.000000e+00 : f8E4M3FN -> tensor<64x64xf8E4M3FN>
      %34 = tt.load %25 mask %32 other %33 : tensor<64x64x!tt.ptr<f8E4M3FN>>, tensor<64x64xi1>, tensor<64x64xf8E4M3FN> -> tensor<64x64xf8E4M3FN>
      %35 = tt.expand_dims %9 axis = 1 : tensor<64xi32> -> tensor<64x1xi32>
      %36 = tt.mul %35, %16 : tensor<64x1xi32>
      %37 = tt.splat %b_ptr : !tt.ptr<f8E5M2> -> tensor<64x1x!tt.ptr<f8E5M2>>
      %38 = tt.addptr %37, %36 : tensor<64x1x!tt.ptr<f8E5M2>>, tensor<64x1xi32>
      %39 = tt.broadcast %38 : tensor<64x1x!tt.ptr<f8E5M2>> -> tensor<64x64x!tt.ptr<f8E5M2>>
      %40 = tt.addptr %39, %23 : tensor<64x64x!tt.ptr<f8E5M2>>, tensor<64x64xi32>
      %41 = tt.splat %N : i32 -> tensor<64x1xi32>
      %42 = tt.cmp "lt", %35, %41 : tensor<64x1xi32> -> tensor<64x1xi1>
      %43 = tt.broadcast %42 : tensor<64x1xi1> -> tensor<64x64xi1>
      %44 = tt.and %43, %31 : tensor<64x64xi1>
      %45 = tt.constant 0.000000e+00 : f8E5M2 -> tensor<64x64xf8E5M2>
      %46 = tt.load %40 mask %44 other %45 : tensor<64x64x!tt.ptr<f8E5M2>>, tensor<64x64xi1>, tensor<64x64xf8E5M2> -> tensor<64x64xf8E5M2>
      %47 = tt.trans %46 {order = array<i32: 1, 0>} : tensor<64x64xf8E5M2> -> tensor<64x64xf8E5M2>
      %48 = tt.dot %34, %47, %14 max_num_imprecise_acc = 32 : tensor<64x64xf8E4M3FN>, tensor<64x64xf8E5M2> -> tensor<64x64xf32>
      scf.yield %48 : tensor<64x64xf32>
    }
    %49 = tt.expand_dims %5 axis = 1 : tensor<64xi32> -> tensor<64x1xi32>
    %50 = tt.splat %N : i32 -> tensor<64x1xi32>
    %51 = tt.mul %49, %50 : tensor<64x1xi32>
    %52 = tt.splat %c_ptr : !tt.ptr<f32> -> tensor<64x1x!tt.ptr<f32>>
    %53 = tt.addptr %52, %51 : tensor<64x1x!tt.ptr<f32>>, tensor<64x1xi32>
    %54 = tt.expand_dims %9 axis = 0 : tensor<64xi32> -> tensor<1x64xi32>
    %55 = tt.broadcast %54 : tensor<1x64xi32> -> tensor<64x64xi32>
    %56 = tt.broadcast %53 : tensor<64x1x!tt.ptr<f32>> -> tensor<64x64x!tt.ptr<f32>>
    %57 = tt.addptr %56, %55 : tensor<64x64x!tt.ptr<f32>>, tensor<64x64xi32>
    %58 = tt.splat %M : i32 -> tensor<64x1xi32>
    %59 = tt.cmp "lt", %49, %58 : tensor<64x1xi32> -> tensor<64x1xi1>
    %60 = tt.splat %N : i32 -> tensor<1x64xi32>
    %61 = tt.cmp "lt", %54, %60 : tensor<1x64xi32> -> tensor<1x64xi1>
    %62 = tt.broadcast %59 : tensor<64x1xi1> -> tensor<64x64xi1>
    %63 = tt.broadcast %61 : tensor<1x64xi1> -> tensor<64x64xi1>
    %64 = tt.and %62, %63 : tensor<64x64xi1>
    tt.store %57, %12 mask %64 : tensor<64x64x!tt.ptr<f32>>, tensor<64x64xf32>, tensor<64x64xi1>
    func.return
  }
}
