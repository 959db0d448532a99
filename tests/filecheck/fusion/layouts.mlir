// RUN: tinyton-opt %s -p tinyton-push-layouts | filecheck %s --check-prefix=PUSH
// RUN: tinyton-opt %s -p tinyton-fuse | filecheck %s --check-prefix=FUSE

// tinyton-push-layouts moves a transpose that keeps the last dim (heads split or merged) of a computed value,
// its only reader, onto the values the computation reads: the computation runs in the transposed order.

// RoPE's backward merged into heads for a projection's weight gradient: the transpose moves through the add and
// the products onto x and the tables (a table's missing batch dims added first, the transpose of that reshape a
// reshape); one kernel where the elementwise kernel's result was copied by a transpose kernel of its own.
func.func @heads_merged(%x: tensor<2x4x8x16xf32>, %cos: tensor<8x16xf32>, %sin: tensor<8x16xf32>) -> tensor<2x8x4x16xf32> {
  %a = tta.mul %x, %cos : tensor<2x4x8x16xf32>, tensor<8x16xf32> -> tensor<2x4x8x16xf32>
  %b = tta.mul %x, %sin : tensor<2x4x8x16xf32>, tensor<8x16xf32> -> tensor<2x4x8x16xf32>
  %s = tta.add %a, %b : tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32> -> tensor<2x4x8x16xf32>
  %t = tta.transpose %s permutation = [0, 2, 1, 3] : tensor<2x4x8x16xf32> -> tensor<2x8x4x16xf32>
  func.return %t : tensor<2x8x4x16xf32>
}

// PUSH-LABEL: func.func @heads_merged
// PUSH:         %[[X:.+]] = tta.transpose %x permutation = [0, 2, 1, 3]
// PUSH-NEXT:    %[[C:.+]] = tta.reshape %cos : tensor<8x16xf32> -> tensor<1x8x1x16xf32>
// PUSH-NEXT:    tta.mul %[[X]], %[[C]] : tensor<2x8x4x16xf32>, tensor<1x8x1x16xf32> -> tensor<2x8x4x16xf32>
// PUSH-NOT:     tta.transpose %s
// PUSH:         %t = tta.add {{.*}} -> tensor<2x8x4x16xf32>
// PUSH-NEXT:    func.return %t

// FUSE-LABEL: func.func @heads_merged
// FUSE-NEXT:    %t = tta.fusion "elementwise"(%x, %cos, %sin)
// FUSE-NOT:     tta.fusion

// `.mT` (a product's transposed operand, where the matmul and attention forms read it) and a transpose of a value
// with another reader stay.
func.func @kept(%x: tensor<4x8xf32>, %y: tensor<2x4x8xf32>) -> (tensor<8x4xf32>, tensor<4x2x8xf32>, tensor<2x4x8xf32>) {
  %e = tta.exp %x : tensor<4x8xf32>
  %t = tta.transpose %e permutation = [1, 0] : tensor<4x8xf32> -> tensor<8x4xf32>
  %n = tta.neg %y : tensor<2x4x8xf32>
  %u = tta.transpose %n permutation = [1, 0, 2] : tensor<2x4x8xf32> -> tensor<4x2x8xf32>
  func.return %t, %u, %n : tensor<8x4xf32>, tensor<4x2x8xf32>, tensor<2x4x8xf32>
}

// PUSH-LABEL: func.func @kept
// PUSH:         %e = tta.exp %x
// PUSH-NEXT:    %t = tta.transpose %e permutation = [1, 0]
// PUSH-NEXT:    %n = tta.neg %y
// PUSH-NEXT:    %u = tta.transpose %n permutation = [1, 0, 2]

// FUSE-LABEL: func.func @kept
// FUSE:         tta.fusion "transpose"(%e)

// A reshape merging adjacent dims of a computed value that is then reduced (a norm weight's gradient summed over
// batch and sequence: one reduction of the merged axes) moves onto the values read: one kernel, where the product
// was stored for the reduction. A reshape whose value is not reduced stays (a matmul's epilogue reads it there).
func.func @merged_then_reduced(%x: tensor<2x8x64xf32>, %w: tensor<64xf32>) -> tensor<64xf32> {
  %p = tta.mul %x, %w : tensor<2x8x64xf32>, tensor<64xf32> -> tensor<2x8x64xf32>
  %r = tta.reshape %p : tensor<2x8x64xf32> -> tensor<16x64xf32>
  %s = tta.reduce_sum %r axis = 0 : tensor<16x64xf32> -> tensor<64xf32>
  func.return %s : tensor<64xf32>
}

// PUSH-LABEL: func.func @merged_then_reduced
// PUSH-NEXT:    %[[X:.+]] = tta.reshape %x : tensor<2x8x64xf32> -> tensor<16x64xf32>
// PUSH-NEXT:    %[[W:.+]] = tta.reshape %w : tensor<64xf32> -> tensor<1x64xf32>
// PUSH-NEXT:    %[[P:.+]] = tta.mul %[[X]], %[[W]] : tensor<16x64xf32>, tensor<1x64xf32> -> tensor<16x64xf32>
// PUSH-NEXT:    %s = tta.reduce_sum %[[P]] axis = 0

// FUSE-LABEL: func.func @merged_then_reduced
// FUSE-NEXT:    %s = tta.fusion "reduction"(%x, %w)
// FUSE-NOT:     tta.fusion
// FUSE:         func.return

func.func @merged_not_reduced(%x: tensor<2x8x64xf32>) -> tensor<16x64xf32> {
  %e = tta.exp %x : tensor<2x8x64xf32>
  %r = tta.reshape %e : tensor<2x8x64xf32> -> tensor<16x64xf32>
  func.return %r : tensor<16x64xf32>
}

// PUSH-LABEL: func.func @merged_not_reduced
// PUSH-NEXT:    %e = tta.exp %x
// PUSH-NEXT:    %r = tta.reshape %e

// A transpose of a sum over a group's copies (grouped-query heads repeated by hand: dv summed over the copies, then
// merged into heads): through the squeeze and the reduction onto the summed array, read as a strided view.
func.func @transposed_sum(%x: tensor<2x2x3x8x16xf32>) -> tensor<2x8x2x16xf32> {
  %s = tta.reduce_sum %x axis = 2 keepdims : tensor<2x2x3x8x16xf32> -> tensor<2x2x1x8x16xf32>
  %q = tta.reshape %s : tensor<2x2x1x8x16xf32> -> tensor<2x2x8x16xf32>
  %t = tta.transpose %q permutation = [0, 2, 1, 3] : tensor<2x2x8x16xf32> -> tensor<2x8x2x16xf32>
  func.return %t : tensor<2x8x2x16xf32>
}

// PUSH-LABEL: func.func @transposed_sum
// PUSH-NEXT:    %[[X:.+]] = tta.transpose %x permutation = [0, 3, 2, 1, 4] : tensor<2x2x3x8x16xf32> -> tensor<2x8x3x2x16xf32>
// PUSH-NEXT:    %[[S:.+]] = tta.reduce_sum %[[X]] axis = 2 keepdims : tensor<2x8x3x2x16xf32> -> tensor<2x8x1x2x16xf32>
// PUSH-NEXT:    %t = tta.reshape %[[S]] : tensor<2x8x1x2x16xf32> -> tensor<2x8x2x16xf32>
// PUSH-NEXT:    func.return %t

// FUSE-LABEL: func.func @transposed_sum
// FUSE-NEXT:    %t = tta.fusion "reduction"(%x)
// FUSE-NOT:     tta.fusion
// FUSE:         func.return

// A reshape splitting a computed value's rows (a linear layer's product `[B * T, N]` viewed as `[B, T, N]`) moves
// below its elementwise readers, their other operands merged alike (an input's view, a bias broadcast as it is):
// the activation and the residual run on the product's rows in its epilogue, one kernel where the reshape had left
// them to a second (the reshape left of the result is the same bytes: the program shares their buffer). A reader
// that also reads a value computed in the split shape (a norm's row mean) keeps it.
func.func @split_rows_sink(%x: tensor<16x64xf32>, %w: tensor<64x32xf32>, %b: tensor<32xf32>, %r: tensor<2x8x32xf32>) -> tensor<2x8x32xf32> {
  %p = tta.matmul %x, %w : tensor<16x64xf32>, tensor<64x32xf32> -> tensor<16x32xf32>
  %v = tta.reshape %p : tensor<16x32xf32> -> tensor<2x8x32xf32>
  %a = tta.add %v, %b : tensor<2x8x32xf32>, tensor<32xf32> -> tensor<2x8x32xf32>
  %t = tta.tanh %a : tensor<2x8x32xf32>
  %m = tta.mul %t, %v : tensor<2x8x32xf32>, tensor<2x8x32xf32> -> tensor<2x8x32xf32>
  %s = tta.add %m, %r : tensor<2x8x32xf32>, tensor<2x8x32xf32> -> tensor<2x8x32xf32>
  func.return %s : tensor<2x8x32xf32>
}

// PUSH-LABEL: func.func @split_rows_sink
// PUSH:         %p = tta.matmul %x, %w
// PUSH-NOT:     tta.reshape %p
// PUSH:         tta.tanh %{{.*}} : tensor<16x32xf32>
// PUSH:         %[[R:.+]] = tta.reshape %r : tensor<2x8x32xf32> -> tensor<16x32xf32>
// PUSH:         %[[S:.+]] = tta.add %{{.*}}, %[[R]] : tensor<16x32xf32>, tensor<16x32xf32> -> tensor<16x32xf32>
// PUSH-NEXT:    %{{.*}} = tta.reshape %[[S]] : tensor<16x32xf32> -> tensor<2x8x32xf32>

// FUSE-LABEL: func.func @split_rows_sink
// FUSE-NEXT:    %[[E:.+]] = tta.fusion "matmul_epilogue"(%x, %w, %b, %r) {{.*}} -> tensor<16x32xf32>
// FUSE:         %s = tta.fusion "reshape"(%[[E]])
// FUSE-NOT:     tta.fusion
// FUSE:         func.return

func.func @split_rows_kept(%x: tensor<16x64xf32>, %w: tensor<64x32xf32>) -> tensor<2x8x32xf32> {
  %p = tta.matmul %x, %w : tensor<16x64xf32>, tensor<64x32xf32> -> tensor<16x32xf32>
  %v = tta.reshape %p : tensor<16x32xf32> -> tensor<2x8x32xf32>
  %m = tta.reduce_mean %v axis = 2 keepdims : tensor<2x8x32xf32> -> tensor<2x8x1xf32>
  %d = tta.sub %v, %m : tensor<2x8x32xf32>, tensor<2x8x1xf32> -> tensor<2x8x32xf32>
  func.return %d : tensor<2x8x32xf32>
}

// PUSH-LABEL: func.func @split_rows_kept
// PUSH:         %v = tta.reshape %p : tensor<16x32xf32> -> tensor<2x8x32xf32>
// PUSH:         %d = tta.sub %v, %m

// A convolution is `w [1, C, K] @ columns [B, 1, K, H * W]` viewed as `[B, C, H, W]`: the reshape drops the size-1 dim
// of the single group as it splits the positions, and still moves below the bias add (the bias `[C, 1, 1]` merged to
// `[1, 1, C, 1]`): the bias and an activation run in the product's epilogue (a kernel of their own when a size-1 dim
// the reshape drops stopped the rule).
func.func @convolution_bias(%w: tensor<1x8x12xf32>, %cols: tensor<2x1x12x16xf32>, %b: tensor<8x1x1xf32>) -> tensor<2x8x4x4xf32> {
  %p = tta.matmul %w, %cols : tensor<1x8x12xf32>, tensor<2x1x12x16xf32> -> tensor<2x1x8x16xf32>
  %v = tta.reshape %p : tensor<2x1x8x16xf32> -> tensor<2x8x4x4xf32>
  %a = tta.add %v, %b : tensor<2x8x4x4xf32>, tensor<8x1x1xf32> -> tensor<2x8x4x4xf32>
  %zero = tta.constant 0.000000e+00 : f32 -> f32
  %r = tta.maximum %a, %zero : tensor<2x8x4x4xf32>, f32 -> tensor<2x8x4x4xf32>
  func.return %r : tensor<2x8x4x4xf32>
}

// PUSH-LABEL: func.func @convolution_bias
// PUSH:         %[[B:.+]] = tta.reshape %b : tensor<8x1x1xf32> -> tensor<1x1x8x1xf32>
// PUSH-NEXT:    %[[A:.+]] = tta.add %p, %[[B]] : tensor<2x1x8x16xf32>, tensor<1x1x8x1xf32> -> tensor<2x1x8x16xf32>
// PUSH:         tta.maximum %{{.+}} : tensor<2x1x8x16xf32>, f32 -> tensor<2x1x8x16xf32>

// FUSE-LABEL: func.func @convolution_bias
// FUSE-NEXT:    %[[E:.+]] = tta.fusion "matmul_epilogue"(%w, %cols, %b) {{.*}} -> tensor<2x1x8x16xf32>
// FUSE:         %r = tta.fusion "reshape"(%[[E]])
// FUSE-NOT:     tta.fusion
// FUSE:         func.return

// A transpose of a take that keeps the indices' dims together is a take from the table transposed alike: T5's
// relative-position bias `emb[buckets].permute(2, 0, 1)` gathers [H, L, L] from the table's columns, and its
// buckets, computed along both axes (the column index cast before its reshape to [L, 1]), in the same kernel.
func.func @bias_from_buckets(%emb: tensor<32x4xf32>) -> tensor<4x8x8xf32> {
  %r = tta.arange 0 to 8 : tensor<8xi32>
  %i = tta.cast %r : tensor<8xi32> -> tensor<8xi64>
  %row = tta.reshape %i : tensor<8xi64> -> tensor<8x1xi64>
  %col = tta.reshape %i : tensor<8xi64> -> tensor<1x8xi64>
  %d = tta.sub %col, %row : tensor<1x8xi64>, tensor<8x1xi64> -> tensor<8x8xi64>
  %a = tta.abs %d : tensor<8x8xi64>
  %g = tta.take %emb, %a axis = 0 : tensor<32x4xf32>, tensor<8x8xi64> -> tensor<8x8x4xf32>
  %t = tta.transpose %g permutation = [2, 0, 1] : tensor<8x8x4xf32> -> tensor<4x8x8xf32>
  func.return %t : tensor<4x8x8xf32>
}

// PUSH-LABEL: func.func @bias_from_buckets
// PUSH:         %[[T:.+]] = tta.transpose %emb permutation = [1, 0] : tensor<32x4xf32> -> tensor<4x32xf32>
// PUSH-NEXT:    %t = tta.take %[[T]], %a axis = 1 : tensor<4x32xf32>, tensor<8x8xi64> -> tensor<4x8x8xf32>
// PUSH-NEXT:    func.return %t

// FUSE-LABEL: func.func @bias_from_buckets
// FUSE-NEXT:    %t = tta.fusion "elementwise"(%emb)
// FUSE-NOT:     tta.fusion
