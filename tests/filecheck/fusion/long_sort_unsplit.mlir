// RUN: not tinyton-opt %s -p tinyton-fusion-to-kernels 2>&1 | filecheck %s

// A region sorting rows longer than one program sorts whole (4096 float64 values: 8192 of up to 32 bits), which
// tinyton-split-long-sorts (run by tinyton-fuse) would have split: refused with the pass to run, never a kernel
// holding the row whole.

func.func @unsplit(%x: tensor<20000xf64>) -> tensor<20000xf64> {
  %y = tta.fusion "row_reduction"(%x) : (tensor<20000xf64>) -> tensor<20000xf64> {
  ^bb0(%a: tensor<20000xf64>):
    %s = tta.sort %a axis = 0 : tensor<20000xf64> -> tensor<20000xf64>
    tta.yield %s : tensor<20000xf64>
  }
  func.return %y : tensor<20000xf64>
}

// CHECK: tinyton-opt: error: a sort's row of 20000 elements is longer than one program sorts whole (4096):
// CHECK-SAME: tinyton-split-long-sorts (in tinyton-fuse) splits it
