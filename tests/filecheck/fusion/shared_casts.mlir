// RUN: tinyton-opt %s -p tinyton-fuse | filecheck %s

// `x.astype(bf16) @ w.T` written once per projection traces one cast per projection; tinyton-fuse merges
// equal ops first (xDSL's cse), so the projections read one operand and are siblings of one kernel, which
// casts `x` in its K loop (the cast is the operand's prologue).

func.func @gate_up(%x: tensor<2x64xf32>, %wg: tensor<128x64xbf16>, %wu: tensor<128x64xbf16>) -> (tensor<2x128xbf16>, tensor<2x128xbf16>) {
  %a = tta.cast %x : tensor<2x64xf32> -> tensor<2x64xbf16>
  %wgt = tta.transpose %wg permutation = [1, 0] : tensor<128x64xbf16> -> tensor<64x128xbf16>
  %g = tta.matmul %a, %wgt : tensor<2x64xbf16>, tensor<64x128xbf16> -> tensor<2x128xbf16>
  %b = tta.cast %x : tensor<2x64xf32> -> tensor<2x64xbf16>
  %wut = tta.transpose %wu permutation = [1, 0] : tensor<128x64xbf16> -> tensor<64x128xbf16>
  %u = tta.matmul %b, %wut : tensor<2x64xbf16>, tensor<64x128xbf16> -> tensor<2x128xbf16>
  func.return %g, %u : tensor<2x128xbf16>, tensor<2x128xbf16>
}

// CHECK-LABEL: func.func @gate_up
// CHECK-NEXT:    %g, %u = tta.fusion "matmul_epilogue"(%x, %wg, %wu)
// CHECK-NEXT:    ^bb0
// CHECK-NEXT:      %a = tta.cast
// CHECK-NOT:       tta.cast
// CHECK:           %g_1 = tta.matmul %a,
// CHECK:           %u_1 = tta.matmul %a,
// CHECK:         func.return %g, %u
