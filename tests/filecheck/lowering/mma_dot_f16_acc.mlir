// tt.dot of f16 tiles on tensor cores: both operands stored to swizzled shared memory, one barrier,
// ldmatrix (A plain, B transposed), then one mma.sync m16n8k16 per 16x8 piece: a 32x32 accumulator
// with 4 warps is one 16x16 block per warp (2 instructions); the f16 accumulator packs halves in pairs.
// REQUIRES: mlir-tools
// RUN: tinyton-opt %s -p tinyton-to-llvm | filecheck %s --check-prefix=LLVM
// RUN: tinyton-opt %s -p tinyton-to-llvm | mlir-translate --mlir-to-llvmir | llc -mtriple=nvptx64-nvidia-cuda -mcpu=sm_80 -mattr=+ptx80 | filecheck %s --check-prefix=PTX
// RUN: %if ptxas %{ tinyton-opt %s -p tinyton-to-llvm | mlir-translate --mlir-to-llvmir | llc -mtriple=nvptx64-nvidia-cuda -mcpu=sm_80 -mattr=+ptx80 -o %t.ptx && ptxas -arch=sm_80 %t.ptx -o %t.cubin %}

// LLVM:      llvm.mlir.global internal @dot_tile_smem() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<2048 x i8>
// LLVM:      llvm.xor
// LLVM:      llvm.store {{.*}} : vector<{{[0-9]}}xf16>, !llvm.ptr<3>
// LLVM:      nvvm.barrier0
// LLVM:      llvm.call_intrinsic "llvm.nvvm.ldmatrix.sync.aligned.m8n8.x4.b16"({{.*}}) : (!llvm.ptr<3>) -> !llvm.struct<(i32, i32, i32, i32)>
// LLVM:      llvm.call_intrinsic "llvm.nvvm.ldmatrix.sync.aligned.m8n8.x4.trans.b16"({{.*}}) : (!llvm.ptr<3>) -> !llvm.struct<(i32, i32, i32, i32)>
// LLVM-COUNT-2: llvm.call_intrinsic "llvm.nvvm.mma.m16n8k16.row.col.f16.f16"({{.*}}) : (vector<2xf16>, vector<2xf16>, vector<2xf16>, vector<2xf16>, vector<2xf16>, vector<2xf16>, vector<2xf16>, vector<2xf16>) -> !llvm.struct<(vector<2xf16>, vector<2xf16>)>
// LLVM-NOT:  llvm.call_intrinsic "llvm.nvvm.mma

// PTX:       bar.sync 0;
// PTX:       ldmatrix.sync.aligned.m8n8.x4.shared.b16
// PTX:       ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16
// PTX-COUNT-2: mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16

builtin.module attributes {tt.num_warps = 4 : i32} {
  func.func @dot_tile(%a_ptr: !tt.ptr<f16> {tt.divisibility = 16 : i32}, %b_ptr: !tt.ptr<f16> {tt.divisibility = 16 : i32}, %c_ptr: !tt.ptr<f16> {tt.divisibility = 16 : i32}) {
    %0 = tt.arange 0 to 32 : tensor<32xi32>
    %1 = tt.arange 0 to 16 : tensor<16xi32>
    %2 = tt.expand_dims %0 axis = 1 : tensor<32xi32> -> tensor<32x1xi32>
    %3 = tt.constant 16 : i32 -> tensor<32x1xi32>
    %4 = tt.mul %2, %3 : tensor<32x1xi32>
    %5 = tt.splat %a_ptr : !tt.ptr<f16> -> tensor<32x1x!tt.ptr<f16>>
    %6 = tt.addptr %5, %4 : tensor<32x1x!tt.ptr<f16>>, tensor<32x1xi32>
    %7 = tt.expand_dims %1 axis = 0 : tensor<16xi32> -> tensor<1x16xi32>
    %8 = tt.broadcast %7 : tensor<1x16xi32> -> tensor<32x16xi32>
    %9 = tt.broadcast %6 : tensor<32x1x!tt.ptr<f16>> -> tensor<32x16x!tt.ptr<f16>>
    %10 = tt.addptr %9, %8 : tensor<32x16x!tt.ptr<f16>>, tensor<32x16xi32>
    %11 = tt.load %10 : tensor<32x16x!tt.ptr<f16>> -> tensor<32x16xf16>
    %12 = tt.expand_dims %1 axis = 1 : tensor<16xi32> -> tensor<16x1xi32>
    %13 = tt.constant 32 : i32 -> tensor<16x1xi32>
    %14 = tt.mul %12, %13 : tensor<16x1xi32>
    %15 = tt.splat %b_ptr : !tt.ptr<f16> -> tensor<16x1x!tt.ptr<f16>>
    %16 = tt.addptr %15, %14 : tensor<16x1x!tt.ptr<f16>>, tensor<16x1xi32>
    %17 = tt.expand_dims %0 axis = 0 : tensor<32xi32> -> tensor<1x32xi32>
    %18 = tt.broadcast %17 : tensor<1x32xi32> -> tensor<16x32xi32>
    %19 = tt.broadcast %16 : tensor<16x1x!tt.ptr<f16>> -> tensor<16x32x!tt.ptr<f16>>
    %20 = tt.addptr %19, %18 : tensor<16x32x!tt.ptr<f16>>, tensor<16x32xi32>
    %21 = tt.load %20 : tensor<16x32x!tt.ptr<f16>> -> tensor<16x32xf16>
    %22 = tt.constant 0.000000e+00 : f16 -> tensor<32x32xf16>
    %23 = tt.constant 32 : i32 -> tensor<32x1xi32>
    %24 = tt.mul %2, %23 : tensor<32x1xi32>
    %25 = tt.splat %c_ptr : !tt.ptr<f16> -> tensor<32x1x!tt.ptr<f16>>
    %26 = tt.addptr %25, %24 : tensor<32x1x!tt.ptr<f16>>, tensor<32x1xi32>
    %27 = tt.broadcast %17 : tensor<1x32xi32> -> tensor<32x32xi32>
    %28 = tt.broadcast %26 : tensor<32x1x!tt.ptr<f16>> -> tensor<32x32x!tt.ptr<f16>>
    %29 = tt.addptr %28, %27 : tensor<32x32x!tt.ptr<f16>>, tensor<32x32xi32>
    %30 = tt.dot %11, %21, %22 : tensor<32x16xf16>, tensor<16x32xf16> -> tensor<32x32xf16>
    tt.store %29, %30 : tensor<32x32x!tt.ptr<f16>>, tensor<32x32xf16>
    func.return
  }
}