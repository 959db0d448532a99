// RUN: TT_ROUNDTRIP

// tta.put: `dest[key] = value` as a value. A window (start + i * step per dim), or along `axis` the
// positions an index array holds (a KV-cache row at a run-time position).

func.func @puts(%c: tensor<2x16x4xf32>, %r: tensor<2x1x4xf32>, %pos: tensor<1xi32>, %w: tensor<2x3x4xf32>) -> (tensor<2x16x4xf32>, tensor<2x16x4xf32>) {
  %a = tta.put %c[%pos : tensor<1xi32>] = %r start = [0, 0, 0] step = [1, 1, 1] axis 1 : tensor<2x16x4xf32>, tensor<2x1x4xf32>
  %b = tta.put %c[] = %w start = [0, 2, 0] step = [1, 3, 1] : tensor<2x16x4xf32>, tensor<2x3x4xf32>
  func.return %a, %b : tensor<2x16x4xf32>, tensor<2x16x4xf32>
}

// CHECK:      %a = tta.put %c[%pos : tensor<1xi32>] = %r start = [0, 0, 0] step = [1, 1, 1] axis 1 : tensor<2x16x4xf32>, tensor<2x1x4xf32>
// CHECK-NEXT: %b = tta.put %c[] = %w start = [0, 2, 0] step = [1, 3, 1] : tensor<2x16x4xf32>, tensor<2x3x4xf32>
