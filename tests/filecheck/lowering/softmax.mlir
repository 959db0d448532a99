// One row per program, the whole row in registers: vector loads, shuffles, one
// shared-memory round per reduction (the two rounds use different buffers, so one
// barrier each), exp through ex2.approx. num_warps comes from the module, or the option.
// REQUIRES: mlir-tools
// RUN: tinyton-opt %s -p 'tinyton-to-llvm' | mlir-translate --mlir-to-llvmir | llc -mtriple=nvptx64-nvidia-cuda -mcpu=sm_90 -mattr=+ptx80 | filecheck %s --check-prefix=PTX
// RUN: tinyton-opt %s -p 'tinyton-to-llvm{num_warps=16}' | mlir-translate --mlir-to-llvmir | llc -mtriple=nvptx64-nvidia-cuda -mcpu=sm_90 -mattr=+ptx80 | filecheck %s --check-prefix=W16
// RUN: %if ptxas %{ tinyton-opt %s -p 'tinyton-to-llvm' | mlir-translate --mlir-to-llvmir | llc -mtriple=nvptx64-nvidia-cuda -mcpu=sm_90 -mattr=+ptx80 -o %t.ptx && ptxas -arch=sm_90 %t.ptx -o %t.cubin %}
// RUN: %if ptxas %{ tinyton-opt %s -p 'tinyton-to-llvm{num_warps=16}' | mlir-translate --mlir-to-llvmir | llc -mtriple=nvptx64-nvidia-cuda -mcpu=sm_90 -mattr=+ptx80 -o %t.ptx && ptxas -arch=sm_90 %t.ptx -o %t.cubin %}

// PTX:       .reqntid 128, 1, 1
// PTX:       .shared .align 16 .b8 softmax_smem[32];
// PTX-COUNT-8: @%p{{[0-9]+}} ld.global.v4.b32
// PTX-COUNT-5: shfl.sync.bfly.b32
// PTX:       bar.sync 0;
// PTX:       ld.shared.v4.b32
// PTX:       ex2.approx.f32
// PTX-COUNT-5: shfl.sync.bfly.b32
// PTX:       bar.sync 0;
// PTX-NOT:   bar.sync
// PTX:       @%p{{[0-9]+}} st.global.v4.b32
// 
// W16:       .reqntid 512, 1, 1
// W16:       .shared .align 16 .b8 softmax_smem[128];
// W16:       ld.global.v4.b32
// W16:       shfl.sync.bfly.b32
// W16:       bar.sync 0;
// W16:       ex2.approx.f32

builtin.module attributes {tt.num_warps = 4 : i32} {
  func.func @softmax(%x: !tt.ptr<f32> {tt.divisibility = 16 : i32}, %y: !tt.ptr<f32> {tt.divisibility = 16 : i32}, %n: i32 {tt.divisibility = 16 : i32}) {

    %row = tt.program_id 0 : i32
    %start = tt.mul %row, %n : i32
    %xr = tt.addptr %x, %start : !tt.ptr<f32>, i32
    %yr = tt.addptr %y, %start : !tt.ptr<f32>, i32
    %offs = tt.arange 0 to 4096 : tensor<4096xi32>
    %ns = tt.splat %n : i32 -> tensor<4096xi32>
    %mask = tt.cmp "lt", %offs, %ns : tensor<4096xi32> -> tensor<4096xi1>
    %xs = tt.splat %xr : !tt.ptr<f32> -> tensor<4096x!tt.ptr<f32>>
    %xp = tt.addptr %xs, %offs : tensor<4096x!tt.ptr<f32>>, tensor<4096xi32>
    %ys = tt.splat %yr : !tt.ptr<f32> -> tensor<4096x!tt.ptr<f32>>
    %yp = tt.addptr %ys, %offs : tensor<4096x!tt.ptr<f32>>, tensor<4096xi32>
    %ninf = tt.constant 0xFF800000 : f32 -> tensor<4096xf32>
    %v = tt.load %xp mask %mask other %ninf : tensor<4096x!tt.ptr<f32>>, tensor<4096xi1>, tensor<4096xf32> -> tensor<4096xf32>
    %m = tt.reduce_max %v axis = 0 : tensor<4096xf32> -> f32
    %ms = tt.splat %m : f32 -> tensor<4096xf32>
    %d = tt.sub %v, %ms : tensor<4096xf32>
    %e = tt.exp %d : tensor<4096xf32>
    %s = tt.reduce_sum %e axis = 0 : tensor<4096xf32> -> f32
    %ss = tt.splat %s : f32 -> tensor<4096xf32>
    %o = tt.div %e, %ss : tensor<4096xf32>
    tt.store %yp, %o mask %mask : tensor<4096x!tt.ptr<f32>>, tensor<4096xf32>, tensor<4096xi1>
    func.return
  }
}
