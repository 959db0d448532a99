// Operands whose shapes do not broadcast: the verifier's error, at the op's line.
func.func @f(%x: tensor<4xf32>, %y: tensor<3xf32>) -> tensor<4xf32> {
  %e = tta.add %x, %y : tensor<4xf32>, tensor<3xf32> -> tensor<4xf32>
  func.return %e : tensor<4xf32>
}
