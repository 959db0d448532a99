// A cumsum over a 4096-element row with 4 warps (tl.cumsum): each thread scans its 4 contiguous registers in
// order, each of its 8 register chunks takes one shfl.sync.bfly butterfly step per lane bit (5), the warps
// exchange their totals through one shared-memory round (one barrier), and the chunks are carried in order:
// code linear in the 32 elements a thread holds. ptxas accepts it.
// RUN: tinyton-opt %s --print-op-generic | tinyton-opt | filecheck %s --check-prefix=IR
// REQUIRES: mlir-tools
// RUN: tinyton-opt %s -p tinyton-to-llvm | mlir-translate --mlir-to-llvmir | llc -mtriple=nvptx64-nvidia-cuda -mcpu=sm_90 -mattr=+ptx80 | filecheck %s --check-prefix=PTX
// RUN: %if ptxas %{ tinyton-opt %s -p tinyton-to-llvm | mlir-translate --mlir-to-llvmir | llc -mtriple=nvptx64-nvidia-cuda -mcpu=sm_90 -mattr=+ptx80 -o %t.ptx && ptxas -arch=sm_90 %t.ptx -o %t.cubin %}

// IR:      "tt.scan"(%{{.*}}) <{axis = 0 : i32, reverse = false}>
// IR:      tt.combine_yield

// PTX:           ld.global
// PTX-COUNT-40:  shfl.sync.bfly.b32
// PTX-NOT:       shfl.sync
// PTX:           st.shared
// PTX:           bar.sync
// PTX-NOT:       bar.sync
// PTX:           ld.shared
// PTX-NOT:       shfl.sync
// PTX:           st.global
// PTX:           ret;

builtin.module attributes {tt.num_warps = 4 : i32} {
  func.func @scan_rows(%x_ptr: !tt.ptr<i32> {tt.divisibility = 16 : i32}, %o_ptr: !tt.ptr<i32> {tt.divisibility = 16 : i32}) {
    %0 = tt.arange 0 to 4096 : tensor<4096xi32>
    %1 = tt.splat %o_ptr : !tt.ptr<i32> -> tensor<4096x!tt.ptr<i32>>
    %2 = tt.addptr %1, %0 : tensor<4096x!tt.ptr<i32>>, tensor<4096xi32>
    %3 = tt.splat %x_ptr : !tt.ptr<i32> -> tensor<4096x!tt.ptr<i32>>
    %4 = tt.addptr %3, %0 : tensor<4096x!tt.ptr<i32>>, tensor<4096xi32>
    %5 = tt.load %4 : tensor<4096x!tt.ptr<i32>> -> tensor<4096xi32>
    %6 = "tt.scan"(%5) <{axis = 0 : i32, reverse = false}> ({
    ^bb0(%7: i32, %8: i32):
      %9 = tt.add %7, %8 : i32
      tt.combine_yield %9 : i32
    }) : (tensor<4096xi32>) -> tensor<4096xi32>
    tt.store %2, %6 : tensor<4096x!tt.ptr<i32>>, tensor<4096xi32>
    func.return
  }
}
