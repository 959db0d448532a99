// RUN: tinyton-opt %s -p tinyton-fuse | filecheck %s

// k and v given as `where(arange(T)[:, None] == pos, new row, cache)` (a decode step's cache update):
// the where, its index mask (cloned per use) and the view of the new row join the attention, which loads
// the row and the cache and selects; no kernel materialises the updated caches.

func.func @decode_update(%q: tensor<4x1x4xf32>, %krow: tensor<4x1x4xf32>, %vrow: tensor<4x1x4xf32>, %kc: tensor<4x16x4xf32>, %vc: tensor<4x16x4xf32>, %pos: tensor<1xi32>) -> tensor<4x1x4xf32> {
  %ninf = tta.constant 0xff800000 : f32 -> f32
  %t = tta.arange 0 to 16 : tensor<16xi32>
  %eq = tta.cmp "eq", %t, %pos : tensor<16xi32>, tensor<1xi32> -> tensor<16xi1>
  %here = tta.reshape %eq : tensor<16xi1> -> tensor<16x1xi1>
  %k = tta.where %here, %krow, %kc : tensor<16x1xi1>, tensor<4x1x4xf32>, tensor<4x16x4xf32> -> tensor<4x16x4xf32>
  %v = tta.where %here, %vrow, %vc : tensor<16x1xi1>, tensor<4x1x4xf32>, tensor<4x16x4xf32> -> tensor<4x16x4xf32>
  %visible = tta.cmp "le", %t, %pos : tensor<16xi32>, tensor<1xi32> -> tensor<16xi1>
  %kt = tta.transpose %k permutation = [0, 2, 1] : tensor<4x16x4xf32> -> tensor<4x4x16xf32>
  %s0 = tta.matmul %q, %kt : tensor<4x1x4xf32>, tensor<4x4x16xf32> -> tensor<4x1x16xf32>
  %s = tta.where %visible, %s0, %ninf : tensor<16xi1>, tensor<4x1x16xf32>, f32 -> tensor<4x1x16xf32>
  %m = tta.reduce_max %s axis = 2 keepdims : tensor<4x1x16xf32> -> tensor<4x1x1xf32>
  %d = tta.sub %s, %m : tensor<4x1x16xf32>, tensor<4x1x1xf32> -> tensor<4x1x16xf32>
  %e = tta.exp %d : tensor<4x1x16xf32>
  %l = tta.reduce_sum %e axis = 2 keepdims : tensor<4x1x16xf32> -> tensor<4x1x1xf32>
  %p = tta.div %e, %l : tensor<4x1x16xf32>, tensor<4x1x1xf32> -> tensor<4x1x16xf32>
  %o = tta.matmul %p, %v : tensor<4x1x16xf32>, tensor<4x16x4xf32> -> tensor<4x1x4xf32>
  func.return %o : tensor<4x1x4xf32>
}

// CHECK-LABEL: func.func @decode_update
// CHECK-NEXT:    %o = tta.fusion "attention"
// CHECK-COUNT-2:   tta.where %{{.*}}, %{{.*}}, %{{.*}} : tensor<16x1xi1>
// CHECK:           tta.matmul
// CHECK-NOT:     tta.fusion
