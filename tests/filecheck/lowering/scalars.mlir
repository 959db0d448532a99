// Scalar loads (masked: `other` moved in first) and stores, which only thread 0 performs.
// REQUIRES: mlir-tools
// RUN: tinyton-opt %s -p tinyton-to-llvm | filecheck %s --check-prefix=LLVM
// RUN: %if ptxas %{ tinyton-opt %s -p tinyton-to-llvm | mlir-translate --mlir-to-llvmir | llc -mtriple=nvptx64-nvidia-cuda -mcpu=sm_90 -mattr=+ptx80 -o %t.ptx && ptxas -arch=sm_90 %t.ptx -o %t.cubin %}

// LLVM:      llvm.inline_asm has_side_effects "mov.b32 $0, $2;\0A\09@$3 ld.global.b32 $0, [ $1 + 0 ];", "=r,l,r,b"
// LLVM:      llvm.inline_asm has_side_effects "ld.global.b32 $0, [ $1 + 0 ];", "=r,l"
// LLVM:      llvm.inline_asm has_side_effects "@$2 st.global.b32 [ $0 + 0 ], $1;", "l,r,b"

builtin.module attributes {tt.num_warps = 1 : i32} {
  func.func @scalars(%x_ptr: !tt.ptr<f32> {tt.divisibility = 16 : i32}, %y_ptr: !tt.ptr<f32> {tt.divisibility = 16 : i32}, %n: i32) {
    %0 = tt.constant 0 : i32 -> i32
    %1 = tt.cmp "gt", %n, %0 : i32 -> i1
    %2 = tt.constant 7.000000e+00 : f32 -> f32
    %3 = tt.load %x_ptr mask %1 other %2 : !tt.ptr<f32>, i1, f32 -> f32
    %4 = tt.constant 1 : i32 -> i32
    %5 = tt.addptr %x_ptr, %4 : !tt.ptr<f32>, i32
    %6 = tt.load %5 : !tt.ptr<f32> -> f32
    %7 = tt.mul %3, %6 : f32
    tt.store %y_ptr, %7 : !tt.ptr<f32>, f32
    %8 = tt.addptr %y_ptr, %4 : !tt.ptr<f32>, i32
    %9 = tt.add %3, %6 : f32
    %10 = tt.constant 5 : i32 -> i32
    %11 = tt.cmp "gt", %n, %10 : i32 -> i1
    tt.store %8, %9 mask %11 : !tt.ptr<f32>, f32, i1
    func.return
  }
}
