// Boolean tiles live in memory as bytes: 8 per thread move as one ld.global.v2.b32 and are
// unpacked with shifts; storing x > 0 packs them back.
// REQUIRES: mlir-tools
// RUN: tinyton-opt %s -p tinyton-to-llvm | filecheck %s --check-prefix=LLVM
// RUN: %if ptxas %{ tinyton-opt %s -p tinyton-to-llvm | mlir-translate --mlir-to-llvmir | llc -mtriple=nvptx64-nvidia-cuda -mcpu=sm_90 -mattr=+ptx80 -o %t.ptx && ptxas -arch=sm_90 %t.ptx -o %t.cubin %}

// LLVM:      llvm.inline_asm has_side_effects "ld.global.v2.b32 { $0, $1 }, [ $2 + 0 ];"
// LLVM:      llvm.lshr
// LLVM:      llvm.trunc %{{.*}} : i32 to i8
// LLVM:      llvm.icmp "ne"
// LLVM:      llvm.inline_asm has_side_effects "st.global.v2.b32 [ $0 + 0 ], { $1, $2 };"

builtin.module attributes {tt.num_warps = 4 : i32} {
  func.func @bools(%m_ptr: !tt.ptr<i1> {tt.divisibility = 16 : i32}, %x_ptr: !tt.ptr<f32> {tt.divisibility = 16 : i32}, %o_ptr: !tt.ptr<f32> {tt.divisibility = 16 : i32}, %ob_ptr: !tt.ptr<i1> {tt.divisibility = 16 : i32}) {
    %0 = tt.arange 0 to 1024 : tensor<1024xi32>
    %1 = tt.splat %m_ptr : !tt.ptr<i1> -> tensor<1024x!tt.ptr<i1>>
    %2 = tt.addptr %1, %0 : tensor<1024x!tt.ptr<i1>>, tensor<1024xi32>
    %3 = tt.load %2 : tensor<1024x!tt.ptr<i1>> -> tensor<1024xi1>
    %4 = tt.splat %x_ptr : !tt.ptr<f32> -> tensor<1024x!tt.ptr<f32>>
    %5 = tt.addptr %4, %0 : tensor<1024x!tt.ptr<f32>>, tensor<1024xi32>
    %6 = tt.load %5 : tensor<1024x!tt.ptr<f32>> -> tensor<1024xf32>
    %7 = tt.splat %o_ptr : !tt.ptr<f32> -> tensor<1024x!tt.ptr<f32>>
    %8 = tt.addptr %7, %0 : tensor<1024x!tt.ptr<f32>>, tensor<1024xi32>
    %9 = tt.neg %6 : tensor<1024xf32>
    %10 = tt.select %3, %6, %9 : tensor<1024xi1>, tensor<1024xf32>
    tt.store %8, %10 : tensor<1024x!tt.ptr<f32>>, tensor<1024xf32>
    %11 = tt.splat %ob_ptr : !tt.ptr<i1> -> tensor<1024x!tt.ptr<i1>>
    %12 = tt.addptr %11, %0 : tensor<1024x!tt.ptr<i1>>, tensor<1024xi32>
    %13 = tt.constant 0.000000e+00 : f32 -> tensor<1024xf32>
    %14 = tt.cmp "gt", %6, %13 : tensor<1024xf32> -> tensor<1024xi1>
    tt.store %12, %14 : tensor<1024x!tt.ptr<i1>>, tensor<1024xi1>
    func.return
  }
}
