// An array program that calls another function: the fusion passes work on one function at a time.
func.func @program(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = func.call @helper(%x) : (tensor<4xf32>) -> tensor<4xf32>
  func.return %y : tensor<4xf32>
}

func.func @helper(%x: tensor<4xf32>) -> tensor<4xf32> {
  %e = tta.exp %x : tensor<4xf32>
  func.return %e : tensor<4xf32>
}
