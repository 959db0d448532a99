// Nested scf.for with a scalar carried through both, a reduction in the inner loop (its
// shared-memory round is fenced by a barrier at the start of each iteration) and an
// scf.if storing from one thread.
// REQUIRES: mlir-tools
// RUN: tinyton-opt %s -p tinyton-to-llvm | filecheck %s --check-prefix=LLVM
// RUN: %if ptxas %{ tinyton-opt %s -p tinyton-to-llvm | mlir-translate --mlir-to-llvmir | llc -mtriple=nvptx64-nvidia-cuda -mcpu=sm_90 -mattr=+ptx80 -o %t.ptx && ptxas -arch=sm_90 %t.ptx -o %t.cubin %}

// LLVM:      ^[[OUTER:bb[0-9]+]](%{{.*}}: i32, %{{.*}}: f32):
// LLVM:      ^[[INNER:bb[0-9]+]](%{{.*}}: i32, %{{.*}}: f32):
// LLVM:      nvvm.barrier0
// LLVM:      nvvm.barrier0
// LLVM:      llvm.br ^[[INNER]]
// LLVM:      @$2 st.global.b32
// LLVM:      llvm.br ^[[OUTER]]

builtin.module attributes {tt.num_warps = 4 : i32} {
  func.func @nested(%x_ptr: !tt.ptr<f32> {tt.divisibility = 16 : i32}, %y_ptr: !tt.ptr<f32> {tt.divisibility = 16 : i32}, %R: i32, %C: i32) {
    %0 = tt.constant 0 : i32 -> i32
    %1 = tt.constant 1 : i32 -> i32
    %2 = tt.constant 0.000000e+00 : f32 -> f32
    %3 = scf.for %4 = %0 to %R step %1 iter_args(%5 = %2) -> (f32) : i32 {
      %6 = tt.constant 256 : i32 -> i32
      %7 = scf.for %8 = %0 to %C step %6 iter_args(%9 = %5) -> (f32) : i32 {
        %10 = tt.arange 0 to 256 : tensor<256xi32>
        %11 = tt.splat %8 : i32 -> tensor<256xi32>
        %12 = tt.add %11, %10 : tensor<256xi32>
        %13 = tt.mul %4, %C : i32
        %14 = tt.addptr %x_ptr, %13 : !tt.ptr<f32>, i32
        %15 = tt.splat %14 : !tt.ptr<f32> -> tensor<256x!tt.ptr<f32>>
        %16 = tt.addptr %15, %12 : tensor<256x!tt.ptr<f32>>, tensor<256xi32>
        %17 = tt.splat %C : i32 -> tensor<256xi32>
        %18 = tt.cmp "lt", %12, %17 : tensor<256xi32> -> tensor<256xi1>
        %19 = tt.constant 0.000000e+00 : f32 -> tensor<256xf32>
        %20 = tt.load %16 mask %18 other %19 : tensor<256x!tt.ptr<f32>>, tensor<256xi1>, tensor<256xf32> -> tensor<256xf32>
        %21 = tt.mul %20, %20 : tensor<256xf32>
        %22 = tt.reduce_sum %21 axis = 0 : tensor<256xf32> -> f32
        %23 = tt.add %9, %22 : f32
        scf.yield %23 : f32
      }
      %24 = tt.constant 2 : i32 -> i32
      %25 = tt.mod %4, %24 : i32
      %26 = tt.cmp "eq", %25, %1 : i32 -> i1
      scf.if %26 {
        %27 = tt.floordiv %4, %24 : i32
        %28 = tt.addptr %y_ptr, %27 : !tt.ptr<f32>, i32
        tt.store %28, %7 : !tt.ptr<f32>, f32
      } else {
      }
      scf.yield %7 : f32
    }
    func.return
  }
}
