// scf.if with a tile result: both branches branch to a block whose arguments are the
// result's registers.
// REQUIRES: mlir-tools
// RUN: tinyton-opt %s -p tinyton-to-llvm | filecheck %s --check-prefix=LLVM
// RUN: %if ptxas %{ tinyton-opt %s -p tinyton-to-llvm | mlir-translate --mlir-to-llvmir | llc -mtriple=nvptx64-nvidia-cuda -mcpu=sm_90 -mattr=+ptx80 -o %t.ptx && ptxas -arch=sm_90 %t.ptx -o %t.cubin %}

// LLVM:      llvm.cond_br %{{.*}}, ^[[THEN:bb[0-9]+]], ^[[ELSE:bb[0-9]+]]
// LLVM:      ^[[THEN]]:
// LLVM:      llvm.br ^[[MERGE:bb[0-9]+]](%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : f32, f32, f32, f32)
// LLVM:      ^[[ELSE]]:
// LLVM:      nvvm.shfl.sync bfly
// LLVM:      llvm.br ^[[MERGE]](%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : f32, f32, f32, f32)
// LLVM:      ^[[MERGE]](%{{.*}}: f32, %{{.*}}: f32, %{{.*}}: f32, %{{.*}}: f32):

builtin.module attributes {tt.num_warps = 4 : i32} {
  func.func @branchy(%x_ptr: !tt.ptr<f32> {tt.divisibility = 16 : i32}, %y_ptr: !tt.ptr<f32> {tt.divisibility = 16 : i32}) {
    %0 = tt.program_id 0 : i32
    %1 = tt.constant 512 : i32 -> i32
    %2 = tt.mul %0, %1 : i32
    %3 = tt.arange 0 to 512 : tensor<512xi32>
    %4 = tt.splat %2 : i32 -> tensor<512xi32>
    %5 = tt.add %4, %3 : tensor<512xi32>
    %6 = tt.splat %x_ptr : !tt.ptr<f32> -> tensor<512x!tt.ptr<f32>>
    %7 = tt.addptr %6, %5 : tensor<512x!tt.ptr<f32>>, tensor<512xi32>
    %8 = tt.load %7 : tensor<512x!tt.ptr<f32>> -> tensor<512xf32>
    %9 = tt.constant 2 : i32 -> i32
    %10 = tt.mod %0, %9 : i32
    %11 = tt.constant 0 : i32 -> i32
    %12 = tt.cmp "eq", %10, %11 : i32 -> i1
    %13 = scf.if %12 -> (tensor<512xf32>) {
      %14 = tt.constant 2.000000e+00 : f32 -> tensor<512xf32>
      %15 = tt.mul %8, %14 : tensor<512xf32>
      scf.yield %15 : tensor<512xf32>
    } else {
      %16 = tt.reduce_sum %8 axis = 0 : tensor<512xf32> -> f32
      %17 = tt.splat %16 : f32 -> tensor<512xf32>
      %18 = tt.add %8, %17 : tensor<512xf32>
      scf.yield %18 : tensor<512xf32>
    }
    %19 = tt.splat %y_ptr : !tt.ptr<f32> -> tensor<512x!tt.ptr<f32>>
    %20 = tt.addptr %19, %5 : tensor<512x!tt.ptr<f32>>, tensor<512xi32>
    tt.store %20, %13 : tensor<512x!tt.ptr<f32>>, tensor<512xf32>
    func.return
  }
}
