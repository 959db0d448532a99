// Transposing copy indexed by i // 64 and i % 64: power-of-two divisors become a shift
// and a mask (Python's floor semantics hold for them); no division is emitted.
// REQUIRES: mlir-tools
// RUN: tinyton-opt %s -p tinyton-to-llvm | mlir-translate --mlir-to-llvmir | llc -mtriple=nvptx64-nvidia-cuda -mcpu=sm_90 -mattr=+ptx80 | filecheck %s --check-prefix=PTX
// RUN: %if ptxas %{ tinyton-opt %s -p tinyton-to-llvm | mlir-translate --mlir-to-llvmir | llc -mtriple=nvptx64-nvidia-cuda -mcpu=sm_90 -mattr=+ptx80 -o %t.ptx && ptxas -arch=sm_90 %t.ptx -o %t.cubin %}

// PTX-NOT:   {{div|rem}}.s32
// PTX-DAG:   shr.s32
// PTX-DAG:   ld.global.v2.b32
// PTX-COUNT-2: st.global.b32
// PTX-NOT:   {{div|rem}}.s32

builtin.module attributes {tt.num_warps = 4 : i32} {
  func.func @transpose_idx(%x_ptr: !tt.ptr<f32> {tt.divisibility = 16 : i32}, %y_ptr: !tt.ptr<f32> {tt.divisibility = 16 : i32}) {
    %0 = tt.program_id 0 : i32
    %1 = tt.constant 256 : i32 -> i32
    %2 = tt.mul %0, %1 : i32
    %3 = tt.arange 0 to 256 : tensor<256xi32>
    %4 = tt.splat %2 : i32 -> tensor<256xi32>
    %5 = tt.add %4, %3 : tensor<256xi32>
    %6 = tt.constant 64 : i32 -> tensor<256xi32>
    %7 = tt.floordiv %5, %6 : tensor<256xi32>
    %8 = tt.mod %5, %6 : tensor<256xi32>
    %9 = tt.constant 16 : i32 -> tensor<256xi32>
    %10 = tt.mul %8, %9 : tensor<256xi32>
    %11 = tt.splat %y_ptr : !tt.ptr<f32> -> tensor<256x!tt.ptr<f32>>
    %12 = tt.addptr %11, %10 : tensor<256x!tt.ptr<f32>>, tensor<256xi32>
    %13 = tt.addptr %12, %7 : tensor<256x!tt.ptr<f32>>, tensor<256xi32>
    %14 = tt.splat %x_ptr : !tt.ptr<f32> -> tensor<256x!tt.ptr<f32>>
    %15 = tt.addptr %14, %5 : tensor<256x!tt.ptr<f32>>, tensor<256xi32>
    %16 = tt.load %15 : tensor<256x!tt.ptr<f32>> -> tensor<256xf32>
    tt.store %13, %16 : tensor<256x!tt.ptr<f32>>, tensor<256xf32>
    func.return
  }
}
