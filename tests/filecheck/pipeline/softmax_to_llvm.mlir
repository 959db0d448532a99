// RUN: tinyton-opt %s -p tinyton-fuse,tinyton-fusion-to-kernels,tinyton-to-llvm | filecheck %s

// The whole array-program pipeline on a .mlir file: fuse the softmax chain into one region, generate its
// tile kernel as a nested module, and lower that kernel to the llvm + nvvm dialects.

func.func @softmax(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %m = tta.reduce_max %x axis = 1 keepdims : tensor<4x8xf32> -> tensor<4x1xf32>
  %s = tta.sub %x, %m : tensor<4x8xf32>, tensor<4x1xf32> -> tensor<4x8xf32>
  %e = tta.exp %s : tensor<4x8xf32>
  %d = tta.reduce_sum %e axis = 1 keepdims : tensor<4x8xf32> -> tensor<4x1xf32>
  %r = tta.div %e, %d : tensor<4x8xf32>, tensor<4x1xf32> -> tensor<4x8xf32>
  func.return %r : tensor<4x8xf32>
}

// CHECK:      tta.fusion "softmax"(%x) {kernel = "[[KERNEL:[a-z_0-9]+]]"}
// CHECK:      builtin.module @[[KERNEL]]
// CHECK:        llvm.func @[[KERNEL]](%{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>) attributes {nvvm.kernel
// CHECK:          nvvm.shfl.sync bfly
// CHECK:          llvm.return
