// RUN: tinyton-opt %s | filecheck %s
// RUN: tinyton-opt %s --print-op-generic | tinyton-opt | filecheck %s

// Every tta op in its custom form survives a round trip (custom and generic).

func.func @ops(%x: tensor<4x8xf32>, %w: tensor<8xf32>, %i: tensor<3xi32>, %t: tensor<10x8xf32>, %n: tensor<8xi32>) -> tensor<4x8xf32> {
  %c = tta.constant 1.000000e-06 : f32 -> f32
  %k = tta.constant 3 : i32 -> i32
  %b = tta.constant true -> i1
  %add = tta.add %x, %w : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  %sub = tta.sub %x, %c : tensor<4x8xf32>, f32 -> tensor<4x8xf32>
  %mul = tta.mul %x, %x : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %div = tta.div %x, %w : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  %fdv = tta.floordiv %n, %k : tensor<8xi32>, i32 -> tensor<8xi32>
  %mod = tta.mod %n, %k : tensor<8xi32>, i32 -> tensor<8xi32>
  %max = tta.maximum %x, %c : tensor<4x8xf32>, f32 -> tensor<4x8xf32>
  %min = tta.minimum %x, %c : tensor<4x8xf32>, f32 -> tensor<4x8xf32>
  %and = tta.and %n, %k : tensor<8xi32>, i32 -> tensor<8xi32>
  %or = tta.or %n, %k : tensor<8xi32>, i32 -> tensor<8xi32>
  %xor = tta.xor %n, %k : tensor<8xi32>, i32 -> tensor<8xi32>
  %shl = tta.shl %n, %k : tensor<8xi32>, i32 -> tensor<8xi32>
  %shr = tta.shr %n, %k : tensor<8xi32>, i32 -> tensor<8xi32>
  %pow = tta.pow %x, %c : tensor<4x8xf32>, f32 -> tensor<4x8xf32>
  %cmp = tta.cmp "lt", %x, %w : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xi1>
  %neg = tta.neg %x : tensor<4x8xf32>
  %abs = tta.abs %n : tensor<8xi32>
  %exp = tta.exp %x : tensor<4x8xf32>
  %log = tta.log %x : tensor<4x8xf32>
  %sqrt = tta.sqrt %x : tensor<4x8xf32>
  %rsqrt = tta.rsqrt %c : f32
  %where = tta.where %cmp, %x, %c : tensor<4x8xi1>, tensor<4x8xf32>, f32 -> tensor<4x8xf32>
  %cast = tta.cast %x : tensor<4x8xf32> -> tensor<4x8xf16>
  %rsum = tta.reduce_sum %x axis = 1 keepdims : tensor<4x8xf32> -> tensor<4x1xf32>
  %rmax = tta.reduce_max %x axis = 0 : tensor<4x8xf32> -> tensor<8xf32>
  %rmin = tta.reduce_min %n axis = 0 : tensor<8xi32> -> i32
  %rmean = tta.reduce_mean %x axis = 1 : tensor<4x8xf32> -> tensor<4xf32>
  %tr = tta.transpose %x permutation = [1, 0] : tensor<4x8xf32> -> tensor<8x4xf32>
  %mm = tta.matmul %x, %tr : tensor<4x8xf32>, tensor<8x4xf32> -> tensor<4x4xf32>
  %rs = tta.reshape %x : tensor<4x8xf32> -> tensor<2x16xf32>
  %bc = tta.broadcast_to %w : tensor<8xf32> -> tensor<4x8xf32>
  %tk = tta.take %t, %i axis = 0 : tensor<10x8xf32>, tensor<3xi32> -> tensor<3x8xf32>
  %rprod = tta.reduce_prod %x axis = 1 : tensor<4x8xf32> -> tensor<4xf32>
  %amax = tta.argmax %x axis = 1 keepdims : tensor<4x8xf32> -> tensor<4x1xi64>
  %amin = tta.argmin %n axis = 0 : tensor<8xi32> -> i64
  %csum = tta.cumsum %x axis = 1 : tensor<4x8xf32> -> tensor<4x8xf32>
  %cprod = tta.cumprod %n axis = 0 : tensor<8xi32> -> tensor<8xi32>
  %sorted = tta.sort %x axis = 1 descending : tensor<4x8xf32> -> tensor<4x8xf32>
  %order = tta.argsort %n axis = 0 : tensor<8xi32> -> tensor<8xi64>
  func.return %add : tensor<4x8xf32>
}

// CHECK:      %c = tta.constant 1.000000e-06 : f32 -> f32
// CHECK-NEXT: %k = tta.constant 3 : i32 -> i32
// CHECK-NEXT: %b = tta.constant true -> i1
// CHECK-NEXT: %add = tta.add %x, %w : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
// CHECK-NEXT: %sub = tta.sub %x, %c : tensor<4x8xf32>, f32 -> tensor<4x8xf32>
// CHECK-NEXT: %mul = tta.mul %x, %x : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT: %div = tta.div %x, %w : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
// CHECK-NEXT: %fdv = tta.floordiv %n, %k : tensor<8xi32>, i32 -> tensor<8xi32>
// CHECK-NEXT: %mod = tta.mod %n, %k : tensor<8xi32>, i32 -> tensor<8xi32>
// CHECK-NEXT: %max = tta.maximum %x, %c : tensor<4x8xf32>, f32 -> tensor<4x8xf32>
// CHECK-NEXT: %min = tta.minimum %x, %c : tensor<4x8xf32>, f32 -> tensor<4x8xf32>
// CHECK-NEXT: %and = tta.and %n, %k : tensor<8xi32>, i32 -> tensor<8xi32>
// CHECK-NEXT: %or = tta.or %n, %k : tensor<8xi32>, i32 -> tensor<8xi32>
// CHECK-NEXT: %xor = tta.xor %n, %k : tensor<8xi32>, i32 -> tensor<8xi32>
// CHECK-NEXT: %shl = tta.shl %n, %k : tensor<8xi32>, i32 -> tensor<8xi32>
// CHECK-NEXT: %shr = tta.shr %n, %k : tensor<8xi32>, i32 -> tensor<8xi32>
// CHECK-NEXT: %pow = tta.pow %x, %c : tensor<4x8xf32>, f32 -> tensor<4x8xf32>
// CHECK-NEXT: %cmp = tta.cmp "lt", %x, %w : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xi1>
// CHECK-NEXT: %neg = tta.neg %x : tensor<4x8xf32>
// CHECK-NEXT: %abs = tta.abs %n : tensor<8xi32>
// CHECK-NEXT: %exp = tta.exp %x : tensor<4x8xf32>
// CHECK-NEXT: %log = tta.log %x : tensor<4x8xf32>
// CHECK-NEXT: %sqrt = tta.sqrt %x : tensor<4x8xf32>
// CHECK-NEXT: %rsqrt = tta.rsqrt %c : f32
// CHECK-NEXT: %where = tta.where %cmp, %x, %c : tensor<4x8xi1>, tensor<4x8xf32>, f32 -> tensor<4x8xf32>
// CHECK-NEXT: %cast = tta.cast %x : tensor<4x8xf32> -> tensor<4x8xf16>
// CHECK-NEXT: %rsum = tta.reduce_sum %x axis = 1 keepdims : tensor<4x8xf32> -> tensor<4x1xf32>
// CHECK-NEXT: %rmax = tta.reduce_max %x axis = 0 : tensor<4x8xf32> -> tensor<8xf32>
// CHECK-NEXT: %rmin = tta.reduce_min %n axis = 0 : tensor<8xi32> -> i32
// CHECK-NEXT: %rmean = tta.reduce_mean %x axis = 1 : tensor<4x8xf32> -> tensor<4xf32>
// CHECK-NEXT: %tr = tta.transpose %x permutation = [1, 0] : tensor<4x8xf32> -> tensor<8x4xf32>
// CHECK-NEXT: %mm = tta.matmul %x, %tr : tensor<4x8xf32>, tensor<8x4xf32> -> tensor<4x4xf32>
// CHECK-NEXT: %rs = tta.reshape %x : tensor<4x8xf32> -> tensor<2x16xf32>
// CHECK-NEXT: %bc = tta.broadcast_to %w : tensor<8xf32> -> tensor<4x8xf32>
// CHECK-NEXT: %tk = tta.take %t, %i axis = 0 : tensor<10x8xf32>, tensor<3xi32> -> tensor<3x8xf32>
// CHECK-NEXT: %rprod = tta.reduce_prod %x axis = 1 : tensor<4x8xf32> -> tensor<4xf32>
// CHECK-NEXT: %amax = tta.argmax %x axis = 1 keepdims : tensor<4x8xf32> -> tensor<4x1xi64>
// CHECK-NEXT: %amin = tta.argmin %n axis = 0 : tensor<8xi32> -> i64
// CHECK-NEXT: %csum = tta.cumsum %x axis = 1 : tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT: %cprod = tta.cumprod %n axis = 0 : tensor<8xi32> -> tensor<8xi32>
// CHECK-NEXT: %sorted = tta.sort %x axis = 1 descending : tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT: %order = tta.argsort %n axis = 0 : tensor<8xi32> -> tensor<8xi64>
