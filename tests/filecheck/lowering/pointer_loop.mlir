// Triton's pointer-bump idiom: a tile of pointers carried through scf.for and advanced by
// BLOCK each iteration (one block argument per register, as for any tile). The axis
// analysis joins the initial and the yielded pointers to a fixpoint, so the loads in the
// loop stay 128 bits wide.
// REQUIRES: mlir-tools
// RUN: tinyton-opt %s -p tinyton-to-llvm | filecheck %s --check-prefix=LLVM
// RUN: tinyton-opt %s -p tinyton-to-llvm | mlir-translate --mlir-to-llvmir | llc -mtriple=nvptx64-nvidia-cuda -mcpu=sm_90 -mattr=+ptx80 | filecheck %s --check-prefix=PTX
// RUN: %if ptxas %{ tinyton-opt %s -p tinyton-to-llvm | mlir-translate --mlir-to-llvmir | llc -mtriple=nvptx64-nvidia-cuda -mcpu=sm_90 -mattr=+ptx80 -o %t.ptx && ptxas -arch=sm_90 %t.ptx -o %t.cubin %}

// LLVM:      ^bb1(%{{[0-9]+}}: i32, %{{[0-9]+}}: f32, %{{[0-9]+}}: f32, %{{[0-9]+}}: f32, %{{[0-9]+}}: f32, %{{[0-9]+}}: !llvm.ptr<1>, %{{[0-9]+}}: !llvm.ptr<1>, %{{[0-9]+}}: !llvm.ptr<1>, %{{[0-9]+}}: !llvm.ptr<1>):
// LLVM:      ld.global.v4.b32 { $0, $1, $2, $3 }, [ $4 + 0 ];", "=r,=r,=r,=r,l" %{{[0-9]+}} :
// LLVM:      llvm.getelementptr %{{[0-9]+}}[%{{[0-9]+}}] : (!llvm.ptr<1>, i32) -> !llvm.ptr<1>, f32
// LLVM:      llvm.br ^bb1

// PTX:       ld.global.v4.b32

builtin.module attributes {tt.num_warps = 4 : i32} {
  func.func @rowsum_loop(%x_ptr: !tt.ptr<f32> {tt.divisibility = 16 : i32}, %y_ptr: !tt.ptr<f32> {tt.divisibility = 16 : i32}, %n: i32 {tt.divisibility = 16 : i32}) {
    %0 = tt.program_id 0 : i32
    %1 = tt.mul %0, %n : i32
    %2 = tt.addptr %x_ptr, %1 : !tt.ptr<f32>, i32
    %3 = tt.arange 0 to 512 : tensor<512xi32>
    %4 = tt.splat %2 : !tt.ptr<f32> -> tensor<512x!tt.ptr<f32>>
    %5 = tt.addptr %4, %3 : tensor<512x!tt.ptr<f32>>, tensor<512xi32>
    %6 = tt.constant 0.000000e+00 : f32 -> tensor<512xf32>
    %7 = tt.constant 0 : i32 -> i32
    %8 = tt.constant 512 : i32 -> i32
    %9, %10 = scf.for %11 = %7 to %n step %8 iter_args(%12 = %6, %13 = %5) -> (tensor<512xf32>, tensor<512x!tt.ptr<f32>>) : i32 {
      %14 = tt.load %13 : tensor<512x!tt.ptr<f32>> -> tensor<512xf32>
      %15 = tt.add %12, %14 : tensor<512xf32>
      %16 = tt.constant 512 : i32 -> tensor<512xi32>
      %17 = tt.addptr %13, %16 : tensor<512x!tt.ptr<f32>>, tensor<512xi32>
      scf.yield %15, %17 : tensor<512xf32>, tensor<512x!tt.ptr<f32>>
    }
    %18 = tt.addptr %y_ptr, %0 : !tt.ptr<f32>, i32
    %19 = tt.reduce_sum %9 axis = 0 : tensor<512xf32> -> f32
    tt.store %18, %19 : !tt.ptr<f32>, f32
    func.return
  }
}
