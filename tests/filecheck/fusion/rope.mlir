// RUN: tinyton-opt %s -p tinyton-concatenate-to-slices | filecheck %s --check-prefix=CONCAT
// RUN: tinyton-opt %s -p tinyton-push-slices | filecheck %s --check-prefix=PUSH
// RUN: tinyton-opt %s -p tinyton-fuse,tinyton-fusion-to-kernels | filecheck %s --check-prefix=FUSE

// RoPE: `concatenate([-x2, x1], -1) * sin + x * cos` with x1, x2 the halves of x's last axis. The
// concatenation is a select between two shifted windows of its parts (unspecified outside them), the
// windows are pushed up to the arrays read from memory, and the whole program is ONE kernel whose
// loads of x at an offset are masked to their half (the other half reads 0, never selected).

func.func @rope(%x: tensor<2x3x5x8xf32>, %sin: tensor<5x8xf32>, %cos: tensor<5x8xf32>) -> tensor<2x3x5x8xf32> {
  %x1 = tta.slice %x start = [0, 0, 0, 0] step = [1, 1, 1, 1] : tensor<2x3x5x8xf32> -> tensor<2x3x5x4xf32>
  %x2 = tta.slice %x start = [0, 0, 0, 4] step = [1, 1, 1, 1] : tensor<2x3x5x8xf32> -> tensor<2x3x5x4xf32>
  %n = tta.neg %x2 : tensor<2x3x5x4xf32>
  %r = tta.concatenate %n, %x1 axis = 3 : tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32> -> tensor<2x3x5x8xf32>
  %a = tta.mul %r, %sin : tensor<2x3x5x8xf32>, tensor<5x8xf32> -> tensor<2x3x5x8xf32>
  %b = tta.mul %x, %cos : tensor<2x3x5x8xf32>, tensor<5x8xf32> -> tensor<2x3x5x8xf32>
  %out = tta.add %a, %b : tensor<2x3x5x8xf32>, tensor<2x3x5x8xf32> -> tensor<2x3x5x8xf32>
  func.return %out : tensor<2x3x5x8xf32>
}

// The concatenation alone: each part shifted to its place (unspecified elsewhere), a select by position.
// CONCAT-LABEL: func.func @rope
// CONCAT:         %[[P0:.+]] = tta.slice %n start = [0, 0, 0, 0] step = [1, 1, 1, 1] : tensor<2x3x5x4xf32> -> tensor<2x3x5x8xf32>
// CONCAT-NEXT:    %[[P1:.+]] = tta.slice %x1 start = [0, 0, 0, -4] step = [1, 1, 1, 1] : tensor<2x3x5x4xf32> -> tensor<2x3x5x8xf32>
// CONCAT:         %[[FIRST:.+]] = tta.cmp "lt"
// CONCAT-NEXT:    %r = tta.where %[[FIRST]], %[[P0]], %[[P1]]
// CONCAT-NOT:     tta.concatenate

// PUSH-LABEL: func.func @rope
// PUSH-NEXT:    %[[HI:.+]] = tta.slice %x start = [0, 0, 0, 4] step = [1, 1, 1, 1] : tensor<2x3x5x8xf32> -> tensor<2x3x5x8xf32>
// PUSH-NEXT:    %[[NEG:.+]] = tta.neg %[[HI]]
// PUSH-NEXT:    %[[LO:.+]] = tta.slice %x start = [0, 0, 0, -4] step = [1, 1, 1, 1] : tensor<2x3x5x8xf32> -> tensor<2x3x5x8xf32>
// PUSH-NEXT:    %[[I:.+]] = tta.arange 0 to 8
// PUSH-NEXT:    %[[I4:.+]] = tta.reshape %[[I]] : tensor<8xi32> -> tensor<1x1x1x8xi32>
// PUSH-NEXT:    %[[H:.+]] = tta.constant 4
// PUSH-NEXT:    %[[FIRST:.+]] = tta.cmp "lt", %[[I4]], %[[H]]
// PUSH-NEXT:    %r = tta.where %[[FIRST]], %[[NEG]], %[[LO]]

// x computed in the program (`a * w`): the windows move onto a and w, the product is evaluated at the
// shifted indices; still one kernel.

func.func @rope_computed(%a: tensor<2x3x5x8xf32>, %w: tensor<8xf32>, %sin: tensor<5x8xf32>, %cos: tensor<5x8xf32>) -> tensor<2x3x5x8xf32> {
  %x = tta.mul %a, %w : tensor<2x3x5x8xf32>, tensor<8xf32> -> tensor<2x3x5x8xf32>
  %x1 = tta.slice %x start = [0, 0, 0, 0] step = [1, 1, 1, 1] : tensor<2x3x5x8xf32> -> tensor<2x3x5x4xf32>
  %x2 = tta.slice %x start = [0, 0, 0, 4] step = [1, 1, 1, 1] : tensor<2x3x5x8xf32> -> tensor<2x3x5x4xf32>
  %n = tta.neg %x2 : tensor<2x3x5x4xf32>
  %r = tta.concatenate %n, %x1 axis = 3 : tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32> -> tensor<2x3x5x8xf32>
  %s = tta.mul %r, %sin : tensor<2x3x5x8xf32>, tensor<5x8xf32> -> tensor<2x3x5x8xf32>
  %c = tta.mul %x, %cos : tensor<2x3x5x8xf32>, tensor<5x8xf32> -> tensor<2x3x5x8xf32>
  %out = tta.add %s, %c : tensor<2x3x5x8xf32>, tensor<2x3x5x8xf32> -> tensor<2x3x5x8xf32>
  func.return %out : tensor<2x3x5x8xf32>
}

// PUSH-LABEL: func.func @rope_computed
// PUSH:         %[[A:.+]] = tta.slice %a start = [0, 0, 0, 4]
// PUSH-NEXT:    %[[W:.+]] = tta.slice %w start = [4] step = [1] : tensor<8xf32> -> tensor<8xf32>
// PUSH-NEXT:    %[[P:.+]] = tta.mul %[[A]], %[[W]]
// PUSH-NEXT:    tta.neg %[[P]]
// PUSH-NOT:     tta.slice %x
// PUSH-NOT:     tta.concatenate


// One region each, and one kernel each (nested modules after the functions).
// FUSE-LABEL: func.func @rope(
// FUSE-NEXT:    %out = tta.fusion "elementwise"(%x, %sin, %cos)
// FUSE-NOT:     tta.fusion
// FUSE-LABEL: func.func @rope_computed(
// FUSE-NEXT:    %out = tta.fusion "elementwise"(%a, %w, %sin, %cos)
// FUSE-NOT:     tta.fusion
// FUSE-LABEL:   func.func @rope_0_elementwise(%x: !tt.ptr<f32>
// FUSE-COUNT-2: tt.load {{.*}} mask {{.*}} other
// FUSE-NOT:     tt.load {{.*}} other
// FUSE-LABEL:   func.func @rope_computed_1_elementwise(
// FUSE-COUNT-4: tt.load {{.*}} mask {{.*}} other
// FUSE-NOT:     tt.load {{.*}} other
// FUSE-NOT:     func.func
