// The verifier of tt.promoted_dot (the pipeliner's float8 dot left in flight): float8 operands, matching shapes,
// a promotion interval within K.
// RUN: tinyton-opt %s --verify-diagnostics --split-input-file | filecheck %s

func.func @not_float8(%a: tensor<64x64xf16>, %b: tensor<64x64xf16>, %c: tensor<64x64xf32>) {
  %0, %1 = tt.promoted_dot %a, %b, %c, %c max_num_imprecise_acc = 32 : tensor<64x64xf16>, tensor<64x64xf16> -> tensor<64x64xf32>
  func.return
}
// CHECK: a promoted dot takes float8 operands

// -----

func.func @inner(%a: tensor<64x64xf8E4M3FN>, %b: tensor<32x64xf8E4M3FN>, %c: tensor<64x64xf32>) {
  %0, %1 = tt.promoted_dot %a, %b, %c, %c max_num_imprecise_acc = 32 : tensor<64x64xf8E4M3FN>, tensor<32x64xf8E4M3FN> -> tensor<64x64xf32>
  func.return
}
// CHECK: promoted dot inner dimensions differ: [64, 64] @ [32, 64]

// -----

func.func @interval(%a: tensor<64x64xf8E4M3FN>, %b: tensor<64x64xf8E4M3FN>, %c: tensor<64x64xf32>) {
  %0, %1 = tt.promoted_dot %a, %b, %c, %c max_num_imprecise_acc = 128 : tensor<64x64xf8E4M3FN>, tensor<64x64xf8E4M3FN> -> tensor<64x64xf32>
  func.return
}
// CHECK: max_num_imprecise_acc must be between 0 and K (64)
