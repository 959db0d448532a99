// RUN: tinyton-opt %s -p tinyton-push-slices | filecheck %s --check-prefix=PUSH
// RUN: tinyton-opt %s -p tinyton-fuse | filecheck %s --check-prefix=FUSE

// tinyton-push-slices moves slices of computed values onto the values read from memory.

// A pad (slice with a fill) of a computed value: the unpadded window moves onto x, and a select puts the
// fill where the window leaves the value (rows 0 and 5); one kernel, its index along axis 0 included.
func.func @pad_of_computed(%x: tensor<4x6xf32>) -> tensor<6x6xf32> {
  %e = tta.exp %x : tensor<4x6xf32>
  %p = tta.slice %e start = [-1, 0] step = [1, 1] fill 2.000000e+00 : f32 : tensor<4x6xf32> -> tensor<6x6xf32>
  func.return %p : tensor<6x6xf32>
}

// PUSH-LABEL: func.func @pad_of_computed
// PUSH-NEXT:    %[[W:.+]] = tta.slice %x start = [-1, 0] step = [1, 1] : tensor<4x6xf32> -> tensor<6x6xf32>
// PUSH-NEXT:    %[[E:.+]] = tta.exp %[[W]] : tensor<6x6xf32>
// PUSH-NEXT:    %[[I:.+]] = tta.arange 0 to 6
// PUSH-NEXT:    %[[I2:.+]] = tta.reshape %[[I]] : tensor<6xi32> -> tensor<6x1xi32>
// PUSH:         tta.cmp "ge", %[[I2]]
// PUSH:         tta.cmp "lt", %[[I2]]
// PUSH:         %[[IN:.+]] = tta.and
// PUSH-NEXT:    %[[FILL:.+]] = tta.constant 2.000000e+00 : f32
// PUSH-NEXT:    %p = tta.where %[[IN]], %[[E]], %[[FILL]]

// FUSE-LABEL: func.func @pad_of_computed
// FUSE-NEXT:    %p = tta.fusion "elementwise"(%x)
// FUSE-NOT:     tta.fusion

// Slices compose (the flip's start moves by the outer slice), then move through the negation and the
// transpose (their windows permuted).
func.func @slice_of_slice_of_transpose(%x: tensor<4x6xf32>) -> tensor<2x3xf32> {
  %t = tta.transpose %x permutation = [1, 0] : tensor<4x6xf32> -> tensor<6x4xf32>
  %n = tta.neg %t : tensor<6x4xf32>
  %a = tta.slice %n start = [5, 0] step = [-1, 1] : tensor<6x4xf32> -> tensor<6x4xf32>
  %b = tta.slice %a start = [1, 1] step = [2, 1] : tensor<6x4xf32> -> tensor<2x3xf32>
  func.return %b : tensor<2x3xf32>
}

// PUSH-LABEL: func.func @slice_of_slice_of_transpose
// PUSH-NEXT:    %[[S:.+]] = tta.slice %x start = [1, 4] step = [1, -2] : tensor<4x6xf32> -> tensor<3x2xf32>
// PUSH-NEXT:    %[[T:.+]] = tta.transpose %[[S]] permutation = [1, 0] : tensor<3x2xf32> -> tensor<2x3xf32>
// PUSH-NEXT:    %b = tta.neg %[[T]]
// PUSH-NEXT:    func.return %b

// FUSE-LABEL: func.func @slice_of_slice_of_transpose
// FUSE-NEXT:    %b = tta.fusion "elementwise"(%x)
// FUSE-NOT:     tta.fusion

// A slice of a reduction stays: the reduction is written, the slice reads it as a view (two kernels).
func.func @slice_of_reduction(%x: tensor<4x6xf32>) -> tensor<2xf32> {
  %s = tta.reduce_sum %x axis = 1 : tensor<4x6xf32> -> tensor<4xf32>
  %b = tta.slice %s start = [1] step = [1] : tensor<4xf32> -> tensor<2xf32>
  func.return %b : tensor<2xf32>
}

// PUSH-LABEL: func.func @slice_of_reduction
// PUSH-NEXT:    %s = tta.reduce_sum %x
// PUSH-NEXT:    %b = tta.slice %s start = [1] step = [1]

// FUSE-LABEL: func.func @slice_of_reduction
// FUSE-NEXT:    %s = tta.fusion "row_reduction"(%x)
// FUSE:         %b = tta.fusion "slice"(%s)
