// tinyton-pipeline on an attention-like loop: q, loaded before the loop and only read by the loop's dot,
// is copied once into a one-slot buffer (its own commit group, older than the prologue's, so the loop's
// first wait covers it); the key block, loaded as stored ([N, K]) and transposed for the dot, is
// pipelined like any dot operand, the transpose reading the slot.
// RUN: tinyton-opt %s -p tinyton-pipeline | filecheck %s

// CHECK:      %[[Q:.*]] = tt.local_alloc : memref<1x64x32xf16, 3 : i32>
// CHECK-NEXT: %[[SLOT:.*]] = tt.constant 0 : i32 -> i32
// CHECK-NEXT: tt.async_copy %{{.*}}, %[[Q]][%[[SLOT]]] : tensor<64x32x!tt.ptr<f16>>, memref<1x64x32xf16, 3 : i32>
// CHECK-NEXT: tt.async_commit
// CHECK-NEXT: %[[QT:.*]] = tt.local_load %[[Q]][%[[SLOT]]]
// CHECK:      %[[K:.*]] = tt.local_alloc : memref<2x32x32xf16, 3 : i32>
// CHECK:      tt.async_commit
// CHECK-NOT:  tt.async_wait
// CHECK:      scf.for
// CHECK-NEXT:   tt.async_wait 0
// CHECK-NEXT:   %[[KT:.*]] = tt.local_load %[[K]]
// CHECK:        %[[T:.*]] = tt.trans %[[KT]]
// CHECK:        tt.dot %[[QT]], %[[T]], %{{.*}} : tensor<64x32xf16>, tensor<32x32xf16> -> tensor<64x32xf32>
// CHECK-NOT:    tt.load
// CHECK:      tt.async_wait 0

builtin.module attributes {tt.num_warps = 4 : i32, tt.num_stages = 2 : i32} {
  func.func @scores(%q_ptr: !tt.ptr<f16> {tt.divisibility = 16 : i32}, %k_ptr: !tt.ptr<f16> {tt.divisibility = 16 : i32}, %o_ptr: !tt.ptr<f32> {tt.divisibility = 16 : i32}, %n: i32) {
    %r = tt.arange 0 to 64 : tensor<64xi32>
    %c = tt.arange 0 to 32 : tensor<32xi32>
    %r2 = tt.expand_dims %r axis = 1 : tensor<64xi32> -> tensor<64x1xi32>
    %c2 = tt.expand_dims %c axis = 0 : tensor<32xi32> -> tensor<1x32xi32>
    %k2 = tt.expand_dims %c axis = 1 : tensor<32xi32> -> tensor<32x1xi32>
    %w = tt.constant 32 : i32 -> i32
    %ws = tt.splat %w : i32 -> tensor<64x1xi32>
    %rw = tt.mul %r2, %ws : tensor<64x1xi32>
    %rb = tt.broadcast %rw : tensor<64x1xi32> -> tensor<64x32xi32>
    %cb = tt.broadcast %c2 : tensor<1x32xi32> -> tensor<64x32xi32>
    %qo = tt.add %rb, %cb : tensor<64x32xi32>
    %qp = tt.splat %q_ptr : !tt.ptr<f16> -> tensor<64x32x!tt.ptr<f16>>
    %qa = tt.addptr %qp, %qo : tensor<64x32x!tt.ptr<f16>>, tensor<64x32xi32>
    %q = tt.load %qa : tensor<64x32x!tt.ptr<f16>> -> tensor<64x32xf16>
    %zero = tt.constant 0.000000e+00 : f32 -> tensor<64x32xf32>
    %lb = tt.constant 0 : i32 -> i32
    %acc = scf.for %j = %lb to %n step %w iter_args(%a = %zero) -> (tensor<64x32xf32>) : i32 {
      %js = tt.splat %j : i32 -> tensor<32x1xi32>
      %kr = tt.add %js, %k2 : tensor<32x1xi32>
      %ks = tt.splat %w : i32 -> tensor<32x1xi32>
      %krw = tt.mul %kr, %ks : tensor<32x1xi32>
      %krb = tt.broadcast %krw : tensor<32x1xi32> -> tensor<32x32xi32>
      %kcb = tt.broadcast %c2 : tensor<1x32xi32> -> tensor<32x32xi32>
      %ko = tt.add %krb, %kcb : tensor<32x32xi32>
      %kp = tt.splat %k_ptr : !tt.ptr<f16> -> tensor<32x32x!tt.ptr<f16>>
      %ka = tt.addptr %kp, %ko : tensor<32x32x!tt.ptr<f16>>, tensor<32x32xi32>
      %k = tt.load %ka : tensor<32x32x!tt.ptr<f16>> -> tensor<32x32xf16>
      %kt = tt.trans %k {order = array<i32: 1, 0>} : tensor<32x32xf16> -> tensor<32x32xf16>
      %s = tt.dot %q, %kt, %a : tensor<64x32xf16>, tensor<32x32xf16> -> tensor<64x32xf32>
      scf.yield %s : tensor<64x32xf32>
    }
    %op = tt.splat %o_ptr : !tt.ptr<f32> -> tensor<64x32x!tt.ptr<f32>>
    %oa = tt.addptr %op, %qo : tensor<64x32x!tt.ptr<f32>>, tensor<64x32xi32>
    tt.store %oa, %acc : tensor<64x32x!tt.ptr<f32>>, tensor<64x32xf32>
    func.return
  }
}
