// RUN: tinyton-opt %s -p tinyton-flash-attention | filecheck %s
// RUN: tinyton-opt %s -p tinyton-fuse,tinyton-fusion-to-kernels | filecheck %s --check-prefix=KERNELS

// The textbook attention backward (p = exp(s - lse), dv = pᵀ do, ds = p (do vᵀ - rowsum(do o)),
// dq = ds k c, dk = dsᵀ q c) becomes one "attention_backward" region: three kernels, delta, dk/dv and dq.
func.func @from_lse(%q: tensor<2x48x16xf32>, %k: tensor<2x40x16xf32>, %v: tensor<2x40x16xf32>,
                    %o: tensor<2x48x16xf32>, %lse: tensor<2x48x1xf32>, %do: tensor<2x48x16xf32>)
    -> (tensor<2x48x16xf32>, tensor<2x40x16xf32>, tensor<2x40x16xf32>) {
  %kt = tta.transpose %k permutation = [0, 2, 1] : tensor<2x40x16xf32> -> tensor<2x16x40xf32>
  %qk = tta.matmul %q, %kt : tensor<2x48x16xf32>, tensor<2x16x40xf32> -> tensor<2x48x40xf32>
  %c = tta.constant 0.25 : f32 -> f32
  %s = tta.mul %qk, %c : tensor<2x48x40xf32>, f32 -> tensor<2x48x40xf32>
  %centered = tta.sub %s, %lse : tensor<2x48x40xf32>, tensor<2x48x1xf32> -> tensor<2x48x40xf32>
  %p = tta.exp %centered : tensor<2x48x40xf32>
  %pt = tta.transpose %p permutation = [0, 2, 1] : tensor<2x48x40xf32> -> tensor<2x40x48xf32>
  %dv = tta.matmul %pt, %do : tensor<2x40x48xf32>, tensor<2x48x16xf32> -> tensor<2x40x16xf32>
  %vt = tta.transpose %v permutation = [0, 2, 1] : tensor<2x40x16xf32> -> tensor<2x16x40xf32>
  %dp = tta.matmul %do, %vt : tensor<2x48x16xf32>, tensor<2x16x40xf32> -> tensor<2x48x40xf32>
  %od = tta.mul %do, %o : tensor<2x48x16xf32>, tensor<2x48x16xf32> -> tensor<2x48x16xf32>
  %delta = tta.reduce_sum %od axis = 2 keepdims : tensor<2x48x16xf32> -> tensor<2x48x1xf32>
  %diff = tta.sub %dp, %delta : tensor<2x48x40xf32>, tensor<2x48x1xf32> -> tensor<2x48x40xf32>
  %ds = tta.mul %p, %diff : tensor<2x48x40xf32>, tensor<2x48x40xf32> -> tensor<2x48x40xf32>
  %dqm = tta.matmul %ds, %k : tensor<2x48x40xf32>, tensor<2x40x16xf32> -> tensor<2x48x16xf32>
  %dq = tta.mul %dqm, %c : tensor<2x48x16xf32>, f32 -> tensor<2x48x16xf32>
  %dst = tta.transpose %ds permutation = [0, 2, 1] : tensor<2x48x40xf32> -> tensor<2x40x48xf32>
  %dkm = tta.matmul %dst, %q : tensor<2x40x48xf32>, tensor<2x48x16xf32> -> tensor<2x40x16xf32>
  %dk = tta.mul %dkm, %c : tensor<2x40x16xf32>, f32 -> tensor<2x40x16xf32>
  func.return %dq, %dk, %dv : tensor<2x48x16xf32>, tensor<2x40x16xf32>, tensor<2x40x16xf32>
}
// CHECK-LABEL: func.func @from_lse
// CHECK-NEXT:    %{{.*}}, %{{.*}}, %{{.*}} = tta.fusion "attention_backward"
// CHECK:           %p = tta.exp %centered
// CHECK:           %ds = tta.mul %p, %diff
// CHECK:           tta.yield
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return

// Forward and backward in one program (a training step): the softmax is the backward's; the forward kernel
// also stores the rows' logsumexp, then the three backward kernels.
func.func @training_step(%q: tensor<32x16xf32>, %k: tensor<32x16xf32>, %v: tensor<32x16xf32>, %do: tensor<32x16xf32>)
    -> (tensor<32x16xf32>, tensor<32x16xf32>, tensor<32x16xf32>, tensor<32x16xf32>) {
  %kt = tta.transpose %k permutation = [1, 0] : tensor<32x16xf32> -> tensor<16x32xf32>
  %s = tta.matmul %q, %kt : tensor<32x16xf32>, tensor<16x32xf32> -> tensor<32x32xf32>
  %m = tta.reduce_max %s axis = 1 keepdims : tensor<32x32xf32> -> tensor<32x1xf32>
  %d = tta.sub %s, %m : tensor<32x32xf32>, tensor<32x1xf32> -> tensor<32x32xf32>
  %e = tta.exp %d : tensor<32x32xf32>
  %l = tta.reduce_sum %e axis = 1 keepdims : tensor<32x32xf32> -> tensor<32x1xf32>
  %p = tta.div %e, %l : tensor<32x32xf32>, tensor<32x1xf32> -> tensor<32x32xf32>
  %o = tta.matmul %p, %v : tensor<32x32xf32>, tensor<32x16xf32> -> tensor<32x16xf32>
  %pt = tta.transpose %p permutation = [1, 0] : tensor<32x32xf32> -> tensor<32x32xf32>
  %dv = tta.matmul %pt, %do : tensor<32x32xf32>, tensor<32x16xf32> -> tensor<32x16xf32>
  %vt = tta.transpose %v permutation = [1, 0] : tensor<32x16xf32> -> tensor<16x32xf32>
  %dp = tta.matmul %do, %vt : tensor<32x16xf32>, tensor<16x32xf32> -> tensor<32x32xf32>
  %dpp = tta.mul %dp, %p : tensor<32x32xf32>, tensor<32x32xf32> -> tensor<32x32xf32>
  %delta = tta.reduce_sum %dpp axis = 1 keepdims : tensor<32x32xf32> -> tensor<32x1xf32>
  %diff = tta.sub %dp, %delta : tensor<32x32xf32>, tensor<32x1xf32> -> tensor<32x32xf32>
  %ds = tta.mul %p, %diff : tensor<32x32xf32>, tensor<32x32xf32> -> tensor<32x32xf32>
  %dq = tta.matmul %ds, %k : tensor<32x32xf32>, tensor<32x16xf32> -> tensor<32x16xf32>
  %dst = tta.transpose %ds permutation = [1, 0] : tensor<32x32xf32> -> tensor<32x32xf32>
  %dk = tta.matmul %dst, %q : tensor<32x32xf32>, tensor<32x16xf32> -> tensor<32x16xf32>
  func.return %o, %dq, %dk, %dv : tensor<32x16xf32>, tensor<32x16xf32>, tensor<32x16xf32>, tensor<32x16xf32>
}
// CHECK-LABEL: func.func @training_step
// CHECK-NEXT:    tta.fusion "attention_backward"
// CHECK-NOT:     tta.fusion
// CHECK:         func.return

// The kernels: delta (zeroing dq's f32 sum), dk/dv (a loop over query blocks: the scores transposed, sᵀ = k @ qᵀ,
// pᵀ = exp2(sᵀ - lse), pᵀ and dsᵀ multiplied as they come out, ds @ k added to dq's sum) and dq (the sum scaled and
// stored); the training step's forward kernel also stores log2-sums (the logsumexp).
// KERNELS:       tta.fusion "attention_backward"{{.*}}kernel = "[[N:from_lse_[0-9]+_attention_backward]]_delta [[N]]_dkdv [[N]]_dq"
// KERNELS:       tta.fusion "attention_backward"{{.*}}kernel = "[[T:training_step_[0-9]+_attention_backward]]_forward [[T]]_delta [[T]]_dkdv [[T]]_dq"
// KERNELS:       func.func @[[N]]_delta
// KERNELS:         tt.reduce
// KERNELS:         tt.store
// KERNELS:         tt.store
// KERNELS:       func.func @[[N]]_dkdv
// KERNELS:         scf.for
// KERNELS:           tt.trans
// KERNELS:           tt.dot
// KERNELS:           tt.exp2
// KERNELS-NOT:       tt.trans
// KERNELS:           tt.dot
// KERNELS:           tt.dot
// KERNELS:           tt.trans
// KERNELS:           tt.dot
// KERNELS:           "tt.descriptor_reduce"{{.*}}<{kind = "add"
// KERNELS:       func.func @[[N]]_dq
// KERNELS-NOT:     scf.for
// KERNELS-NOT:     tt.dot
// KERNELS:         tt.load
// KERNELS:         tt.store
// KERNELS:       func.func @[[T]]_forward
// KERNELS:         tt.log2
// KERNELS:       func.func @[[T]]_delta
// KERNELS:       func.func @[[T]]_dkdv
// KERNELS:       func.func @[[T]]_dq
