// A tta array program: input of tinyton-fuse, not of tinyton-to-llvm.
func.func @scale(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %two = tta.constant 2.000000e+00 : f32 -> f32
  %y = tta.mul %x, %two : tensor<4x8xf32>, f32 -> tensor<4x8xf32>
  func.return %y : tensor<4x8xf32>
}
