// `tt.descriptor_reduce` (the attention backward's dq: each key block's programs add their share to dq's f32 sum)
// adds a 64 x 64 f32 block to memory. On sm_90a the block goes to the kernel's store tile in the map's swizzled
// 128-byte panels (two of 32 f32 columns), then thread 0 adds each panel with one TMA reduction and commits them
// without waiting; the kernel's end waits for them. Elsewhere it is the atomics it stands for (relaxed: nothing
// reads the old values), one a lane.
// REQUIRES: mlir-tools
// RUN: tinyton-opt %s -p 'tinyton-to-llvm{arch="sm_90a"}' | filecheck %s --check-prefix=TMA
// RUN: tinyton-opt %s -p 'tinyton-to-llvm{arch="sm_80"}' | filecheck %s --check-prefix=ATOM
// RUN: %if ptxas %{ tinyton-opt %s -p 'tinyton-to-llvm{arch="sm_90a"}' | mlir-opt --convert-nvvm-to-llvm | mlir-translate --mlir-to-llvmir | llc -mtriple=nvptx64-nvidia-cuda -mcpu=sm_90a -mattr=+ptx80 -o %t.ptx && ptxas -arch=sm_90a %t.ptx -o %t.cubin %}

// TMA:       "@$0 cp.async.bulk.wait_group.read 0;"
// TMA:       "llvm.nvvm.fence.proxy.async.shared_cta"
// TMA:       cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group
// TMA:       cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group
// TMA-NEXT:  "@$0 cp.async.bulk.commit_group;"
// TMA-NOT:   atom.
// TMA:       "@$0 cp.async.bulk.wait_group 0;"
// TMA-NEXT:  llvm.return

// ATOM-NOT:  cp.reduce
// ATOM:      atom.relaxed.gpu.global.add.f32

builtin.module attributes {tt.num_warps = 4 : i32} {
  func.func @add_block(%src: !tt.ptr<f32> {tt.divisibility = 16 : i32}, %sum: !tt.ptr<f32> {tt.divisibility = 16 : i32}) {
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
    "tt.descriptor_reduce"(%to, %block, %sum, %n, %n, %n, %one, %zero, %zero) <{kind = "add", operandSegmentSizes = array<i32: 1, 1, 0, 1, 2, 2, 2>}> : (tensor<64x64x!tt.ptr<f32>>, tensor<64x64xf32>, !tt.ptr<f32>, i32, i32, i32, i32, i32, i32) -> ()
    func.return
  }
}
