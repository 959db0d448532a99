// A TMA reduction in a loop whose body already has a barrier before it (here `tt.debug_barrier`; in the attention
// backward's dk/dv step, the barrier that publishes ds for its product with k): the leader waits for the previous
// iteration's reduction to have read the store tile right before that barrier, and the reduction writes the tile
// without a wait and a barrier of its own: one barrier to publish the tile, one wait (tma.py, `last_barrier`).
// REQUIRES: mlir-tools
// RUN: tinyton-opt %s -p 'tinyton-to-llvm{arch="sm_90a"}' | filecheck %s
// RUN: %if ptxas %{ tinyton-opt %s -p 'tinyton-to-llvm{arch="sm_90a"}' | mlir-opt --convert-nvvm-to-llvm | mlir-translate --mlir-to-llvmir | llc -mtriple=nvptx64-nvidia-cuda -mcpu=sm_90a -mattr=+ptx80 -o %t.ptx && ptxas -arch=sm_90a %t.ptx -o %t.cubin %}

// CHECK-NOT:  nvvm.barrier0
// CHECK:      "@$0 cp.async.bulk.wait_group.read 0;"
// CHECK-NEXT: nvvm.barrier0
// CHECK-NOT:  wait_group.read
// CHECK:      "llvm.nvvm.fence.proxy.async.shared_cta"
// CHECK-NEXT: nvvm.barrier0
// CHECK-NOT:  nvvm.barrier0
// CHECK:      cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group
// CHECK:      "@$0 cp.async.bulk.commit_group;"
// CHECK-NOT:  nvvm.barrier0
// CHECK:      "@$0 cp.async.bulk.wait_group 0;"
// CHECK-NEXT: llvm.return

builtin.module attributes {tt.num_warps = 4 : i32} {
  func.func @add_blocks(%src: !tt.ptr<f32> {tt.divisibility = 16 : i32}, %sum: !tt.ptr<f32> {tt.divisibility = 16 : i32}, %times: i32) {
    %rows = tt.arange 0 to 64 : tensor<64xi32>
    %r = tt.expand_dims %rows axis = 1 : tensor<64xi32> -> tensor<64x1xi32>
    %c = tt.expand_dims %rows axis = 0 : tensor<64xi32> -> tensor<1x64xi32>
    %c64 = tt.constant 64 : i32 -> tensor<64x1xi32>
    %line = tt.mul %r, %c64 : tensor<64x1xi32>
    %lines = tt.broadcast %line : tensor<64x1xi32> -> tensor<64x64xi32>
    %cols = tt.broadcast %c : tensor<1x64xi32> -> tensor<64x64xi32>
    %offsets = tt.add %lines, %cols : tensor<64x64xi32>
    %base = tt.splat %src : !tt.ptr<f32> -> tensor<64x64x!tt.ptr<f32>>
    %from = tt.addptr %base, %offsets : tensor<64x64x!tt.ptr<f32>>, tensor<64x64xi32>
    %block = tt.load %from : tensor<64x64x!tt.ptr<f32>> -> tensor<64x64xf32>
    %sums = tt.splat %sum : !tt.ptr<f32> -> tensor<64x64x!tt.ptr<f32>>
    %to = tt.addptr %sums, %offsets : tensor<64x64x!tt.ptr<f32>>, tensor<64x64xi32>
    %n = tt.constant 64 : i32 -> i32
    %one = tt.constant 1 : i32 -> i32
    %zero = tt.constant 0 : i32 -> i32
    scf.for %i = %zero to %times step %one : i32 {
      tt.debug_barrier
      "tt.descriptor_reduce"(%to, %block, %sum, %n, %n, %n, %one, %zero, %zero) <{kind = "add", operandSegmentSizes = array<i32: 1, 1, 0, 1, 2, 2, 2>}> : (tensor<64x64x!tt.ptr<f32>>, tensor<64x64xf32>, !tt.ptr<f32>, i32, i32, i32, i32, i32, i32) -> ()
    }
    func.return
  }
}
