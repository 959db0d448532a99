// scf.while carrying a scalar and a tile: the header block computes the condition from its
// arguments, branches to the body (which jumps back) or to the exit, whose arguments are the results.
// REQUIRES: mlir-tools
// RUN: tinyton-opt %s -p tinyton-to-llvm | filecheck %s --check-prefix=LLVM
// RUN: %if ptxas %{ tinyton-opt %s -p tinyton-to-llvm | mlir-translate --mlir-to-llvmir | llc -mtriple=nvptx64-nvidia-cuda -mcpu=sm_90 -mattr=+ptx80 -o %t.ptx && ptxas -arch=sm_90 %t.ptx -o %t.cubin %}

// LLVM:      llvm.br ^[[HEADER:bb[0-9]+]](
// LLVM:      ^[[HEADER]](%{{.*}}: f32, %{{.*}}: f32
// LLVM:      llvm.fcmp "ogt"
// LLVM:      llvm.cond_br %{{.*}}, ^[[BODY:bb[0-9]+]](%{{.*}}), ^[[EXIT:bb[0-9]+]](
// LLVM:      ^[[BODY]](
// LLVM:      nvvm.shfl.sync bfly
// LLVM:      llvm.br ^[[HEADER]](
// LLVM:      ^[[EXIT]](

builtin.module attributes {tt.num_warps = 4 : i32} {
  func.func @halve_until_small(%x_ptr: !tt.ptr<f32> {tt.divisibility = 16 : i32}, %y_ptr: !tt.ptr<f32> {tt.divisibility = 16 : i32}, %limit: f32) {
    %0 = tt.arange 0 to 128 : tensor<128xi32>
    %1 = tt.splat %x_ptr : !tt.ptr<f32> -> tensor<128x!tt.ptr<f32>>
    %2 = tt.addptr %1, %0 : tensor<128x!tt.ptr<f32>>, tensor<128xi32>
    %3 = tt.load %2 : tensor<128x!tt.ptr<f32>> -> tensor<128xf32>
    %4 = tt.abs %3 : tensor<128xf32>
    %5 = tt.reduce_sum %4 axis = 0 : tensor<128xf32> -> f32
    %6, %7 = scf.while (%8 = %5, %9 = %3) : (f32, tensor<128xf32>) -> (f32, tensor<128xf32>) {
      %10 = tt.cmp "gt", %8, %limit : f32 -> i1
      scf.condition(%10) %8, %9 : f32, tensor<128xf32>
    } do {
    ^bb0(%11: f32, %12: tensor<128xf32>):
      %13 = tt.constant 5.000000e-01 : f32 -> tensor<128xf32>
      %14 = tt.mul %12, %13 : tensor<128xf32>
      %15 = tt.abs %14 : tensor<128xf32>
      %16 = tt.reduce_sum %15 axis = 0 : tensor<128xf32> -> f32
      scf.yield %16, %14 : f32, tensor<128xf32>
    }
    %17 = tt.splat %y_ptr : !tt.ptr<f32> -> tensor<128x!tt.ptr<f32>>
    %18 = tt.addptr %17, %0 : tensor<128x!tt.ptr<f32>>, tensor<128xi32>
    tt.store %18, %7 : tensor<128x!tt.ptr<f32>>, tensor<128xf32>
    func.return
  }
}
