// RUN: tinyton-opt %s -p tinyton-flash-attention | filecheck %s

// A bias computed from aranges and values constant along the queries and keys (tinyton/analysis/index_bias.py) is
// cloned into the attention region like an index mask: the kernel computes it from each block's indices and reads
// only the slopes, one a head, where it read [H, S, S].

// ALiBi: `slope[h] * (j - i)`.
func.func @alibi(%q: tensor<4x32x16xf32>, %kt: tensor<4x16x32xf32>, %v: tensor<4x32x16xf32>, %slope: tensor<4x1x1xf32>) -> tensor<4x32x16xf32> {
  %a0 = tta.arange 0 to 32 : tensor<32xi32>
  %i = tta.reshape %a0 : tensor<32xi32> -> tensor<32x1xi32>
  %a1 = tta.arange 0 to 32 : tensor<32xi32>
  %j = tta.reshape %a1 : tensor<32xi32> -> tensor<1x32xi32>
  %dist = tta.sub %j, %i : tensor<1x32xi32>, tensor<32x1xi32> -> tensor<32x32xi32>
  %distf = tta.cast %dist : tensor<32x32xi32> -> tensor<32x32xf32>
  %bias = tta.mul %slope, %distf : tensor<4x1x1xf32>, tensor<32x32xf32> -> tensor<4x32x32xf32>
  %qk = tta.matmul %q, %kt : tensor<4x32x16xf32>, tensor<4x16x32xf32> -> tensor<4x32x32xf32>
  %s = tta.add %qk, %bias : tensor<4x32x32xf32>, tensor<4x32x32xf32> -> tensor<4x32x32xf32>
  %m = tta.reduce_max %s axis = 2 keepdims : tensor<4x32x32xf32> -> tensor<4x32x1xf32>
  %d = tta.sub %s, %m : tensor<4x32x32xf32>, tensor<4x32x1xf32> -> tensor<4x32x32xf32>
  %e = tta.exp %d : tensor<4x32x32xf32>
  %l = tta.reduce_sum %e axis = 2 keepdims : tensor<4x32x32xf32> -> tensor<4x32x1xf32>
  %p = tta.div %e, %l : tensor<4x32x32xf32>, tensor<4x32x1xf32> -> tensor<4x32x32xf32>
  %o = tta.matmul %p, %v : tensor<4x32x32xf32>, tensor<4x32x16xf32> -> tensor<4x32x16xf32>
  func.return %o : tensor<4x32x16xf32>
}
// CHECK-LABEL: func.func @alibi
// CHECK-NEXT:    %o = tta.fusion "attention"(%slope, %q, %kt, %v) : (tensor<4x1x1xf32>, {{.*}}) -> tensor<4x32x16xf32> {
// CHECK:           %dist = tta.sub %j, %i
// CHECK-NEXT:      %distf = tta.cast %dist
// CHECK-NEXT:      %bias = tta.mul
// CHECK:           %s = tta.add %qk, %bias
// CHECK:         func.return %o

// An encoder's symmetric form, `-slope * abs(j - i)`, in float16, over a batch of heads.
func.func @symmetric(%q: tensor<2x4x32x16xf16>, %kt: tensor<2x4x16x32xf16>, %v: tensor<2x4x32x16xf16>, %slope: tensor<4x1x1xf16>) -> tensor<2x4x32x16xf16> {
  %a0 = tta.arange 0 to 32 : tensor<32xi32>
  %a64 = tta.cast %a0 : tensor<32xi32> -> tensor<32xi64>
  %i = tta.reshape %a64 : tensor<32xi64> -> tensor<32x1xi64>
  %j = tta.cast %a0 : tensor<32xi32> -> tensor<32xi64>
  %dist = tta.sub %j, %i : tensor<32xi64>, tensor<32x1xi64> -> tensor<32x32xi64>
  %abs = tta.abs %dist : tensor<32x32xi64>
  %absf = tta.cast %abs : tensor<32x32xi64> -> tensor<32x32xf16>
  %scaled = tta.mul %slope, %absf : tensor<4x1x1xf16>, tensor<32x32xf16> -> tensor<4x32x32xf16>
  %qk = tta.matmul %q, %kt : tensor<2x4x32x16xf16>, tensor<2x4x16x32xf16> -> tensor<2x4x32x32xf16>
  %s = tta.sub %qk, %scaled : tensor<2x4x32x32xf16>, tensor<4x32x32xf16> -> tensor<2x4x32x32xf16>
  %m = tta.reduce_max %s axis = 3 keepdims : tensor<2x4x32x32xf16> -> tensor<2x4x32x1xf16>
  %d = tta.sub %s, %m : tensor<2x4x32x32xf16>, tensor<2x4x32x1xf16> -> tensor<2x4x32x32xf16>
  %e = tta.exp %d : tensor<2x4x32x32xf16>
  %l = tta.reduce_sum %e axis = 3 keepdims : tensor<2x4x32x32xf16> -> tensor<2x4x32x1xf16>
  %p = tta.div %e, %l : tensor<2x4x32x32xf16>, tensor<2x4x32x1xf16> -> tensor<2x4x32x32xf16>
  %o = tta.matmul %p, %v : tensor<2x4x32x32xf16>, tensor<2x4x32x16xf16> -> tensor<2x4x32x16xf16>
  func.return %o : tensor<2x4x32x16xf16>
}
// CHECK-LABEL: func.func @symmetric
// CHECK-NEXT:    %o = tta.fusion "attention"(%slope, %q, %kt, %v) : (tensor<4x1x1xf16>, {{.*}}) -> tensor<2x4x32x16xf16> {
// CHECK:           %abs = tta.abs %dist
// CHECK:           %s = tta.sub %qk, %scaled

// A product of two indices (`i * j`) is no index bias (the kernel's 32-bit product could wrap where the program's
// 64-bit one did not): the bias is computed by a kernel of its own and read.
func.func @index_product(%q: tensor<32x16xf32>, %kt: tensor<16x32xf32>, %v: tensor<32x16xf32>) -> tensor<32x16xf32> {
  %a0 = tta.arange 0 to 32 : tensor<32xi32>
  %a64 = tta.cast %a0 : tensor<32xi32> -> tensor<32xi64>
  %i = tta.reshape %a64 : tensor<32xi64> -> tensor<32x1xi64>
  %j = tta.cast %a0 : tensor<32xi32> -> tensor<32xi64>
  %ij = tta.mul %i, %j : tensor<32x1xi64>, tensor<32xi64> -> tensor<32x32xi64>
  %bias = tta.cast %ij : tensor<32x32xi64> -> tensor<32x32xf32>
  %qk = tta.matmul %q, %kt : tensor<32x16xf32>, tensor<16x32xf32> -> tensor<32x32xf32>
  %s = tta.add %qk, %bias : tensor<32x32xf32>, tensor<32x32xf32> -> tensor<32x32xf32>
  %m = tta.reduce_max %s axis = 1 keepdims : tensor<32x32xf32> -> tensor<32x1xf32>
  %d = tta.sub %s, %m : tensor<32x32xf32>, tensor<32x1xf32> -> tensor<32x32xf32>
  %e = tta.exp %d : tensor<32x32xf32>
  %l = tta.reduce_sum %e axis = 1 keepdims : tensor<32x32xf32> -> tensor<32x1xf32>
  %p = tta.div %e, %l : tensor<32x32xf32>, tensor<32x1xf32> -> tensor<32x32xf32>
  %o = tta.matmul %p, %v : tensor<32x32xf32>, tensor<32x16xf32> -> tensor<32x16xf32>
  func.return %o : tensor<32x16xf32>
}
// CHECK-LABEL: func.func @index_product
// CHECK:         %bias = tta.cast %ij
// CHECK-NEXT:    %o = tta.fusion "attention"(%q, %kt, %bias, %v) : ({{.*}}, tensor<32x32xf32>, {{.*}})

// BERT's padding mask, `(1 - mask) * finfo.min` of an int mask read from memory: no index bias (it is read, not
// computed from the indices), so the attention reads it as it is.
func.func @padding_mask(%q: tensor<2x8x16xf32>, %kt: tensor<2x16x8xf32>, %v: tensor<2x8x16xf32>, %mask: tensor<2x8xi64>) -> tensor<2x8x16xf32> {
  %m3 = tta.reshape %mask : tensor<2x8xi64> -> tensor<2x1x8xi64>
  %mf = tta.cast %m3 : tensor<2x1x8xi64> -> tensor<2x1x8xf32>
  %one = tta.constant 1.000000e+00 : f32 -> f32
  %inv = tta.sub %one, %mf : f32, tensor<2x1x8xf32> -> tensor<2x1x8xf32>
  %low = tta.constant -3.40282347e+38 : f32 -> f32
  %bias = tta.mul %inv, %low : tensor<2x1x8xf32>, f32 -> tensor<2x1x8xf32>
  %qk = tta.matmul %q, %kt : tensor<2x8x16xf32>, tensor<2x16x8xf32> -> tensor<2x8x8xf32>
  %s = tta.add %qk, %bias : tensor<2x8x8xf32>, tensor<2x1x8xf32> -> tensor<2x8x8xf32>
  %m = tta.reduce_max %s axis = 2 keepdims : tensor<2x8x8xf32> -> tensor<2x8x1xf32>
  %d = tta.sub %s, %m : tensor<2x8x8xf32>, tensor<2x8x1xf32> -> tensor<2x8x8xf32>
  %e = tta.exp %d : tensor<2x8x8xf32>
  %l = tta.reduce_sum %e axis = 2 keepdims : tensor<2x8x8xf32> -> tensor<2x8x1xf32>
  %p = tta.div %e, %l : tensor<2x8x8xf32>, tensor<2x8x1xf32> -> tensor<2x8x8xf32>
  %o = tta.matmul %p, %v : tensor<2x8x8xf32>, tensor<2x8x16xf32> -> tensor<2x8x16xf32>
  func.return %o : tensor<2x8x16xf32>
}
// CHECK-LABEL: func.func @padding_mask
// CHECK:         %bias = tta.mul %inv, %low
// CHECK-NEXT:    %o = tta.fusion "attention"(%q, %kt, %bias, %v) : ({{.*}}, tensor<2x1x8xf32>, {{.*}})
