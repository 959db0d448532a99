// A loop whose body starts with a barrier (here `tt.debug_barrier`; in the attention dk/dv step, the one after its
// ring slot is ready) and then stages a column maximum's partials through shared memory. The barrier orders every
// read of shared memory before it, the previous iteration's reads of the partials too (no dot is in flight across
// it), so the round writes right away: two barriers an iteration, where the round had synchronised again before
// writing (an iteration may read what the next one overwrites: `smem_pending` at the body's start).
// REQUIRES: mlir-tools
// RUN: tinyton-opt %s -p tinyton-to-llvm | filecheck %s
// RUN: %if ptxas %{ tinyton-opt %s -p tinyton-to-llvm | mlir-translate --mlir-to-llvmir | llc -mtriple=nvptx64-nvidia-cuda -mcpu=sm_90 -mattr=+ptx80 -o %t.ptx && ptxas -arch=sm_90 %t.ptx -o %t.cubin %}

// CHECK:      nvvm.barrier0
// CHECK-NOT:  nvvm.barrier0
// CHECK:      llvm.store {{.*}} !llvm.ptr<3>
// CHECK:      nvvm.barrier0
// CHECK-NOT:  nvvm.barrier0
// CHECK:      llvm.return

builtin.module attributes {tt.num_warps = 4 : i32} {
  func.func @column_maxima(%x_ptr: !tt.ptr<f32> {tt.divisibility = 16 : i32}, %out: !tt.ptr<f32> {tt.divisibility = 16 : i32}, %n: i32) {
    %rows = tt.arange 0 to 32 : tensor<32xi32>
    %cols = tt.arange 0 to 64 : tensor<64xi32>
    %r = tt.expand_dims %rows axis = 1 : tensor<32xi32> -> tensor<32x1xi32>
    %c64 = tt.constant 64 : i32 -> tensor<32x1xi32>
    %line = tt.mul %r, %c64 : tensor<32x1xi32>
    %c = tt.expand_dims %cols axis = 0 : tensor<64xi32> -> tensor<1x64xi32>
    %lines = tt.broadcast %line : tensor<32x1xi32> -> tensor<32x64xi32>
    %columns = tt.broadcast %c : tensor<1x64xi32> -> tensor<32x64xi32>
    %offsets = tt.add %lines, %columns : tensor<32x64xi32>
    %zero = tt.constant 0 : i32 -> i32
    %one = tt.constant 1 : i32 -> i32
    %block = tt.constant 2048 : i32 -> i32
    %width = tt.constant 64 : i32 -> i32
    scf.for %i = %zero to %n step %one : i32 {
      tt.debug_barrier
      %start = tt.mul %i, %block : i32
      %base = tt.addptr %x_ptr, %start : !tt.ptr<f32>, i32
      %tile_base = tt.splat %base : !tt.ptr<f32> -> tensor<32x64x!tt.ptr<f32>>
      %from = tt.addptr %tile_base, %offsets : tensor<32x64x!tt.ptr<f32>>, tensor<32x64xi32>
      %tile = tt.load %from : tensor<32x64x!tt.ptr<f32>> -> tensor<32x64xf32>
      %maxima = tt.reduce_max %tile axis = 0 : tensor<32x64xf32> -> tensor<64xf32>
      %at = tt.mul %i, %width : i32
      %out_base = tt.addptr %out, %at : !tt.ptr<f32>, i32
      %to_base = tt.splat %out_base : !tt.ptr<f32> -> tensor<64x!tt.ptr<f32>>
      %to = tt.addptr %to_base, %cols : tensor<64x!tt.ptr<f32>>, tensor<64xi32>
      tt.store %to, %maxima : tensor<64x!tt.ptr<f32>>, tensor<64xf32>
    }
    func.return
  }
}
