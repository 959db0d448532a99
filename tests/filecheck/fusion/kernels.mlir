// RUN: tinyton-opt %s -p tinyton-fuse,tinyton-fusion-to-kernels | filecheck %s

// Whole rows in registers: one program per row, BLOCK = next_pow2(1000) with a mask, the reductions
// are tile reductions and the per-row results broadcast back by splat (Triton's tutorial kernel).

func.func @softmax(%x: tensor<64x1000xf32>) -> tensor<64x1000xf32> {
  %m = tta.reduce_max %x axis = 1 keepdims : tensor<64x1000xf32> -> tensor<64x1xf32>
  %s = tta.sub %x, %m : tensor<64x1000xf32>, tensor<64x1xf32> -> tensor<64x1000xf32>
  %e = tta.exp %s : tensor<64x1000xf32>
  %d = tta.reduce_sum %e axis = 1 keepdims : tensor<64x1000xf32> -> tensor<64x1xf32>
  %r = tta.div %e, %d : tensor<64x1000xf32>, tensor<64x1xf32> -> tensor<64x1000xf32>
  func.return %r : tensor<64x1000xf32>
}

// CHECK:       tta.fusion "softmax"(%x) {kernel = "softmax_0_softmax"}
// CHECK-LABEL: builtin.module @softmax_0_softmax attributes {tt.num_warps = 4 : i32, tinyton.grid = array<i64: 64, 1, 1>}
// CHECK-NEXT:    func.func @softmax_0_softmax(%x: !tt.ptr<f32> {tt.divisibility = 16 : i32}, %out0: !tt.ptr<f32> {tt.divisibility = 16 : i32})
// CHECK:           %[[PID:.+]] = tt.program_id 0
// CHECK:           %[[COLS:.+]] = tt.arange 0 to 1024 : tensor<1024xi32>
// CHECK:           %[[MASK:.+]] = tt.cmp "lt", %[[COLS]]
// CHECK:           %[[ROW:.+]] = tt.mul %[[PID]], %{{.+}} : i32
// CHECK:           %[[X:.+]] = tt.load %{{.+}} mask %[[MASK]] : tensor<1024x!tt.ptr<f32>>, tensor<1024xi1> -> tensor<1024xf32>
// CHECK:           tt.select %[[MASK]], %[[X]]
// CHECK:           %[[MAX:.+]] = tt.reduce_max %{{.+}} axis = 0 : tensor<1024xf32> -> f32
// CHECK:           %[[E:.+]] = tt.exp
// CHECK:           %[[SUM:.+]] = tt.reduce_sum %{{.+}} axis = 0 : tensor<1024xf32> -> f32
// Dividing by the row's sum: one reciprocal per row, then per element q = e * r refined by one Newton
// step, q + (e - q * sum) * r, the correctly rounded quotient (q itself where the residual is NaN or q
// overflowed to inf). A sum below 2^-64 (its reciprocal may overflow) and the elements are both scaled by 2^64.
// CHECK:           %[[SCALE:.+]] = tt.select %{{.+}}, %{{.+}}, %{{.+}} : i1, f32
// CHECK:           %[[D:.+]] = tt.mul %[[SUM]], %[[SCALE]] : f32
// CHECK:           %[[R:.+]] = tt.div %{{.+}}, %[[D]] : f32
// CHECK:           %[[SS:.+]] = tt.splat %[[SCALE]]
// CHECK:           %[[A:.+]] = tt.mul %[[E]], %[[SS]] : tensor<1024xf32>
// CHECK:           %[[RS:.+]] = tt.splat %[[R]]
// CHECK:           %[[Q:.+]] = tt.mul %[[A]], %[[RS]] : tensor<1024xf32>
// CHECK:           %[[NQ:.+]] = tt.neg %[[Q]]
// CHECK:           %[[RES:.+]] = tt.fma %[[NQ]], %{{.+}}, %[[A]]
// CHECK:           %[[NAN:.+]] = tt.cmp "ne", %[[RES]], %[[RES]]
// CHECK:           %[[AQ:.+]] = tt.abs %[[Q]]
// CHECK:           %[[INF:.+]] = tt.cmp "eq", %[[AQ]], %{{.+}}
// CHECK:           %[[KEPT:.+]] = tt.or %[[NAN]], %[[INF]]
// CHECK:           %[[QQ:.+]] = tt.fma %[[RES]], %[[RS]], %[[Q]]
// CHECK:           %[[Y:.+]] = tt.select %[[KEPT]], %[[Q]], %[[QQ]]
// CHECK:           tt.store %{{.+}}, %[[Y]] mask %[[MASK]]
// CHECK-NOT:       tt.load
// CHECK:           func.return

// Short rows: several rows per program, a [ROWS, BLOCK] tile; the weight is read as [1, BLOCK]. Every
// input is loaded before the first computation (all loads in flight at once, not one after the reduction).

func.func @rmsnorm(%x: tensor<4096x128xf32>, %w: tensor<128xf32>) -> tensor<4096x128xf32> {
  %sq = tta.mul %x, %x : tensor<4096x128xf32>, tensor<4096x128xf32> -> tensor<4096x128xf32>
  %ms = tta.reduce_mean %sq axis = 1 keepdims : tensor<4096x128xf32> -> tensor<4096x1xf32>
  %eps = tta.constant 9.99999997E-7 : f32 -> f32
  %a = tta.add %ms, %eps : tensor<4096x1xf32>, f32 -> tensor<4096x1xf32>
  %r = tta.rsqrt %a : tensor<4096x1xf32>
  %y = tta.mul %x, %r : tensor<4096x128xf32>, tensor<4096x1xf32> -> tensor<4096x128xf32>
  %o = tta.mul %y, %w : tensor<4096x128xf32>, tensor<128xf32> -> tensor<4096x128xf32>
  func.return %o : tensor<4096x128xf32>
}

// CHECK-LABEL: builtin.module @rmsnorm_1_rmsnorm attributes {tt.num_warps = 4 : i32, tinyton.grid = array<i64: 512, 1, 1>}
// CHECK:           tt.load %{{.+}} : tensor<8x128x!tt.ptr<f32>> -> tensor<8x128xf32>
// CHECK-NOT:       tt.mul
// CHECK:           tt.load %{{.+}} : tensor<1x128x!tt.ptr<f32>> -> tensor<1x128xf32>
// CHECK:           tt.reduce_sum %{{.+}} axis = 1 : tensor<8x128xf32> -> tensor<8xf32>
// CHECK:           tt.expand_dims %{{.+}} axis = 1 : tensor<8xf32> -> tensor<8x1xf32>
// CHECK:           tt.constant 7.812500e-03
// CHECK:           tt.rsqrt %{{.+}} : tensor<8x1xf32>
// CHECK-NOT:       tt.load
// CHECK:           tt.store %{{.+}} : tensor<8x128x!tt.ptr<f32>>, tensor<8x128xf32>

// A row longer than the register budget (264 rows fill the GPU: not split): the online max+sum pass,
// then the output pass.

func.func @long_softmax(%x: tensor<264x40000xf32>) -> tensor<264x40000xf32> {
  %m = tta.reduce_max %x axis = 1 keepdims : tensor<264x40000xf32> -> tensor<264x1xf32>
  %s = tta.sub %x, %m : tensor<264x40000xf32>, tensor<264x1xf32> -> tensor<264x40000xf32>
  %e = tta.exp %s : tensor<264x40000xf32>
  %d = tta.reduce_sum %e axis = 1 keepdims : tensor<264x40000xf32> -> tensor<264x1xf32>
  %r = tta.div %e, %d : tensor<264x40000xf32>, tensor<264x1xf32> -> tensor<264x40000xf32>
  func.return %r : tensor<264x40000xf32>
}

// CHECK-LABEL: builtin.module @long_softmax_2_softmax attributes {tt.num_warps = 8 : i32, tinyton.grid = array<i64: 264, 1, 1>}
// CHECK:           %[[M:.+]], %[[S:.+]] = scf.for %{{.+}} iter_args(%[[MI:.+]] = %{{.+}}, %[[SI:.+]] = %{{.+}}) -> (f32, f32) : i32 {
// CHECK:             tt.load %{{.+}} : tensor<4096x!tt.ptr<f32>>, tensor<4096xi1> -> tensor<4096xf32>
// While the row is all -inf so far the pass subtracts 0, not the maximum (exp(-inf - -inf) is NaN);
// an all -inf row's sum is NaN afterwards, as NumPy's exp(x - max x).sum() is.
// CHECK:             %[[MNEW:.+]] = tt.maximum %[[MI]], %{{.+}} : f32
// CHECK:             %[[NONE:.+]] = tt.cmp "eq", %[[MNEW]], %[[NEGINF:.+]] : f32 -> i1
// CHECK:             %[[MSAFE:.+]] = tt.select %[[NONE]], %{{.+}}, %[[MNEW]] : i1, f32
// CHECK:             tt.splat %[[MSAFE]] : f32 -> tensor<4096xf32>
// CHECK:             tt.sub %[[MI]], %[[MSAFE]] : f32
// CHECK:             scf.yield %[[MNEW]], %{{.+}} : f32, f32
// CHECK:           %[[EMPTY:.+]] = tt.cmp "eq", %[[M]], %{{.+}} : f32 -> i1
// CHECK:           %[[SUM:.+]] = tt.select %[[EMPTY]], %{{.+}}, %[[S]] : i1, f32
// CHECK:           %[[D:.+]] = tt.mul %[[SUM]], %{{.+}} : f32
// CHECK:           scf.for
// CHECK:             tt.splat %[[M]]
// CHECK:             tt.splat %[[D]]
// CHECK:             tt.store
// CHECK:           func.return

// matmul + bias: a K loop of tt.dot on [BM, BK] x [BK, BN] tiles, the bias added to the accumulator.

func.func @linear(%x: tensor<32x64xf32>, %w: tensor<64x48xf32>, %b: tensor<48xf32>) -> tensor<32x48xf32> {
  %y = tta.matmul %x, %w : tensor<32x64xf32>, tensor<64x48xf32> -> tensor<32x48xf32>
  %z = tta.add %y, %b : tensor<32x48xf32>, tensor<48xf32> -> tensor<32x48xf32>
  func.return %z : tensor<32x48xf32>
}

// CHECK-LABEL: builtin.module @linear_3_matmul_epilogue
// CHECK:           %[[ACC:.+]] = scf.for {{.+}} -> (tensor<32x64xf32>) : i32 {
// CHECK:             tt.dot %{{.+}}, %{{.+}}, %{{.+}} : tensor<32x32xf32>, tensor<32x64xf32> -> tensor<32x64xf32>
// CHECK:           tt.add %[[ACC]], %{{.+}} : tensor<32x64xf32>
// CHECK:           tt.store

// Elementwise: a flat 1-D kernel of 1024-element blocks.

func.func @add(%x: tensor<3000xf32>, %y: tensor<3000xf32>) -> tensor<3000xf32> {
  %z = tta.add %x, %y : tensor<3000xf32>, tensor<3000xf32> -> tensor<3000xf32>
  func.return %z : tensor<3000xf32>
}

// CHECK-LABEL: builtin.module @add_4_elementwise attributes {tt.num_warps = 4 : i32, tinyton.grid = array<i64: 3, 1, 1>}
// CHECK:           tt.arange 0 to 1024
// CHECK:           tt.add %{{.+}}, %{{.+}} : tensor<1024xf32>

// A SiLU gate: the gate b is loaded with a, before exp and the division (a load after them waited for
// a's load first: two memory latencies in a row on a latency-bound shape).

func.func @silu_gate(%a: tensor<64x2048xf32>, %b: tensor<64x2048xf32>) -> tensor<64x2048xf32> {
  %one = tta.constant 1.000000e+00 : f32 -> f32
  %n = tta.neg %a : tensor<64x2048xf32>
  %e = tta.exp %n : tensor<64x2048xf32>
  %d = tta.add %e, %one : tensor<64x2048xf32>, f32 -> tensor<64x2048xf32>
  %s = tta.div %a, %d : tensor<64x2048xf32>, tensor<64x2048xf32> -> tensor<64x2048xf32>
  %o = tta.mul %s, %b : tensor<64x2048xf32>, tensor<64x2048xf32> -> tensor<64x2048xf32>
  func.return %o : tensor<64x2048xf32>
}

// CHECK-LABEL: builtin.module @silu_gate_5_elementwise
// CHECK:           %[[A:.+]] = tt.load %{{.+}} : tensor<1024x!tt.ptr<f32>> -> tensor<1024xf32>
// CHECK-NEXT:      %[[BP:.+]] = tt.splat %b
// CHECK-NEXT:      %{{.+}} = tt.addptr %[[BP]]
// CHECK-NEXT:      %[[B:.+]] = tt.load %{{.+}} : tensor<1024x!tt.ptr<f32>> -> tensor<1024xf32>
// CHECK:           tt.exp
// CHECK:           %[[S:.+]] = tt.div %[[A]]
// CHECK:           tt.mul %[[S]], %[[B]]
