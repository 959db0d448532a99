// A type with its closing `>` missing.
func.func @scale(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %y = tta.exp %x : tensor<4x8xf32
  func.return %y : tensor<4x8xf32>
}
