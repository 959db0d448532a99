// RUN: tinyton-opt %s -p tinyton-split-long-sorts | filecheck %s
// RUN: tinyton-opt %s -p tinyton-fuse,tinyton-fusion-to-kernels | filecheck %s --check-prefix=KERNEL

// Rows longer than MAX_SORTED_ROW (8192) are sorted in chunks by the row op and merged. Two rows of 10000: two
// chunks of 5000 each (a view), their sort and argsort one network, the argsort's positions made the row's by
// the chunks' starts; then one merge pass, at each position of the result: a binary search of 13 halving steps,
// each gathering L[i - 1] and R[p - i] of the sorted chunks (NaN last: `<=`, or NaN on the right), and a last
// gather of the values and of the indices at the element that comes first. Two kernels: the merge gathers
// the sorted chunks from memory.

func.func @sorted(%x: tensor<2x10000xf32>) -> (tensor<2x10000xf32>, tensor<2x10000xi64>) {
  %0 = tta.sort %x axis = 1 : tensor<2x10000xf32> -> tensor<2x10000xf32>
  %1 = tta.argsort %x axis = 1 : tensor<2x10000xf32> -> tensor<2x10000xi64>
  func.return %0, %1 : tensor<2x10000xf32>, tensor<2x10000xi64>
}

// CHECK-LABEL: func.func @sorted
// CHECK-NEXT:    %[[CHUNKS:.*]] = tta.reshape %x : tensor<2x10000xf32> -> tensor<2x2x5000xf32>
// CHECK-NEXT:    %[[SORTED:.*]] = tta.sort %[[CHUNKS]] axis = 2 : tensor<2x2x5000xf32> -> tensor<2x2x5000xf32>
// CHECK:         %[[ORDER:.*]] = tta.argsort %[[CHUNKS]] axis = 2 : tensor<2x2x5000xf32> -> tensor<2x2x5000xi64>
// CHECK-NEXT:    %[[INDICES:.*]] = tta.add %[[ORDER]], %{{.*}} : tensor<2x2x5000xi64>, tensor<1x2x1xi64>
// CHECK-NEXT:    %[[VALUES:.*]] = tta.reshape %[[SORTED]] : tensor<2x2x5000xf32> -> tensor<20000xf32>
// CHECK-NEXT:    %[[ROW_INDICES:.*]] = tta.reshape %[[INDICES]] : tensor<2x2x5000xi64> -> tensor<20000xi64>
// CHECK:         %[[L:.*]] = tta.take %[[VALUES]], %{{.*}} axis = 0 : tensor<20000xf32>, tensor<2x10000xi32>
// CHECK-NEXT:    %[[R:.*]] = tta.take %[[VALUES]], %{{.*}} axis = 0 : tensor<20000xf32>, tensor<2x10000xi32>
// CHECK-NEXT:    %[[AT_OR_BEFORE:.*]] = tta.cmp "le", %[[L]], %[[R]]
// CHECK-NEXT:    %[[NAN:.*]] = tta.cmp "ne", %[[R]], %[[R]]
// CHECK-NEXT:    tta.or %[[AT_OR_BEFORE]], %[[NAN]]
// CHECK-COUNT-26: tta.take %[[VALUES]], %{{.*}} axis = 0 : tensor<20000xf32>, tensor<2x10000xi32>
// CHECK-NOT:     tta.take
// CHECK:         %[[AT:.*]] = tta.where
// CHECK-NEXT:    %[[MERGED:.*]] = tta.take %[[VALUES]], %[[AT]] axis = 0
// CHECK-NEXT:    %[[MERGED_INDICES:.*]] = tta.take %[[ROW_INDICES]], %[[AT]] axis = 0
// CHECK-NEXT:    func.return %[[MERGED]], %[[MERGED_INDICES]]

// KERNEL-LABEL: builtin.module @sorted_0_row_reduction
// KERNEL-LABEL: builtin.module @sorted_1_elementwise
// KERNEL-NOT:   builtin.module @sorted

// A row of 8193 in descending order: two chunks of 4097, gathered from the row, the second one's last element
// the smallest int32 (last in the order, so last in the merged row, which has no place for it).

func.func @padded(%x: tensor<8193xi32>) -> tensor<8193xi32> {
  %0 = tta.sort %x axis = 0 descending : tensor<8193xi32> -> tensor<8193xi32>
  func.return %0 : tensor<8193xi32>
}

// CHECK-LABEL: func.func @padded
// CHECK:         %[[COLUMN:.*]] = tta.add {{.*}} : tensor<1x2x1xi32>, tensor<1x1x4097xi32> -> tensor<1x2x4097xi32>
// CHECK:         %[[INSIDE:.*]] = tta.cmp "lt", %[[COLUMN]], %{{.*}} : tensor<1x2x4097xi32>, i32
// CHECK:         %[[FILL:.*]] = tta.constant -2147483648 : i32
// CHECK-NEXT:    %[[ROW:.*]] = tta.take %x, %{{.*}} axis = 0 : tensor<8193xi32>, tensor<1x2x4097xi32>
// CHECK-NEXT:    %[[CHUNKS:.*]] = tta.where %[[INSIDE]], %[[ROW]], %[[FILL]]
// CHECK-NEXT:    %[[SORTED:.*]] = tta.sort %[[CHUNKS]] axis = 2 descending
// CHECK-NEXT:    %[[VALUES:.*]] = tta.reshape %[[SORTED]] : tensor<1x2x4097xi32> -> tensor<8194xi32>
// CHECK-NOT:     tta.argsort
// CHECK:         tta.cmp "ge"
// CHECK-COUNT-26: tta.take %[[VALUES]]
// CHECK-NOT:     tta.take
// CHECK:         %[[AT:.*]] = tta.where %{{.*}} : tensor<8193xi1>, tensor<8193xi32>, tensor<8193xi32>
// CHECK-NEXT:    %[[OUT:.*]] = tta.take %[[VALUES]], %[[AT]] axis = 0 : tensor<8194xi32>, tensor<8193xi32>
// CHECK-NEXT:    func.return %[[OUT]]

// KERNEL-LABEL: builtin.module @padded_{{[0-9]+}}_row_reduction
// KERNEL-LABEL: builtin.module @padded_{{[0-9]+}}_elementwise
// KERNEL-NOT:   builtin.module
