// RUN: tinyton-opt %s -p tinyton-push-gathers | filecheck %s --check-prefix=PUSH
// RUN: tinyton-opt %s -p tinyton-fuse | filecheck %s --check-prefix=FUSE

// tinyton-push-gathers gathers the operands of a flattened elementwise value instead of the value.

// Cross-entropy's gather of `logits - lse`: the logit at the label's flat index, the row's lse at that
// index divided by the row length (its broadcast dim dropped), past lse's end where the index is invalid.
func.func @gather_of_row_difference(%x: tensor<4x6xf32>, %lse: tensor<4x1xf32>, %i: tensor<4x1xi32>) -> tensor<4x1xf32> {
  %d = tta.sub %x, %lse : tensor<4x6xf32>, tensor<4x1xf32> -> tensor<4x6xf32>
  %f = tta.reshape %d : tensor<4x6xf32> -> tensor<24xf32>
  %g = tta.take %f, %i axis = 0 : tensor<24xf32>, tensor<4x1xi32> -> tensor<4x1xf32>
  func.return %g : tensor<4x1xf32>
}

// PUSH-LABEL: func.func @gather_of_row_difference
// PUSH:         %[[XF:.+]] = tta.reshape %x : tensor<4x6xf32> -> tensor<24xf32>
// PUSH-NEXT:    %[[XG:.+]] = tta.take %[[XF]], %i axis = 0
// PUSH:         %[[ROW:.+]] = tta.floordiv %{{.+}}, %{{.+}} : tensor<4x1xi32>, i32
// PUSH-NEXT:    %[[END:.+]] = tta.constant 4 : i32
// PUSH-NEXT:    %[[J:.+]] = tta.where %{{.+}}, %[[END]], %[[ROW]]
// PUSH:         %[[LG:.+]] = tta.take %{{.+}}, %[[J]] axis = 0 : tensor<4xf32>
// PUSH-NEXT:    %g = tta.sub %[[XG]], %[[LG]] : tensor<4x1xf32>, tensor<4x1xf32> -> tensor<4x1xf32>
// PUSH-NOT:     tta.sub %x

// FUSE-LABEL: func.func @gather_of_row_difference
// FUSE-NEXT:    %g = tta.fusion "elementwise"(%x, %i, %lse)
// FUSE-NOT:     tta.fusion
// FUSE:         func.return %g

// A gather that reads as many elements as the value has stays: each operand would be read scattered.
func.func @gather_of_every_element(%x: tensor<2x3xf32>, %i: tensor<6xi32>) -> tensor<6xf32> {
  %e = tta.exp %x : tensor<2x3xf32>
  %f = tta.reshape %e : tensor<2x3xf32> -> tensor<6xf32>
  %g = tta.take %f, %i axis = 0 : tensor<6xf32>, tensor<6xi32> -> tensor<6xf32>
  func.return %g : tensor<6xf32>
}

// PUSH-LABEL: func.func @gather_of_every_element
// PUSH-NEXT:    %e = tta.exp %x
// PUSH-NEXT:    %f = tta.reshape %e
// PUSH-NEXT:    %g = tta.take %f, %i
