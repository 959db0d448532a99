// Masked vector add: 128-bit predicated loads and stores, nothing else.
// REQUIRES: mlir-tools
// RUN: tinyton-opt %s -p tinyton-to-llvm | filecheck %s --check-prefix=LLVM
// RUN: tinyton-opt %s -p 'tinyton-to-llvm' | mlir-translate --mlir-to-llvmir | llc -mtriple=nvptx64-nvidia-cuda -mcpu=sm_90 -mattr=+ptx80 | filecheck %s --check-prefix=PTX
// RUN: %if ptxas %{ tinyton-opt %s -p 'tinyton-to-llvm' | mlir-translate --mlir-to-llvmir | llc -mtriple=nvptx64-nvidia-cuda -mcpu=sm_90 -mattr=+ptx80 -o %t.ptx && ptxas -arch=sm_90 %t.ptx -o %t.cubin %}

// LLVM:      llvm.func @vadd(%{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: i32) attributes {nvvm.kernel, nvvm.reqntid = array<i32: 128, 1, 1>}
// LLVM:      nvvm.read.ptx.sreg.tid.x
// LLVM:      nvvm.read.ptx.sreg.ctaid.x
// LLVM:      llvm.inline_asm has_side_effects "mov.b32 $0, 0;\0A\09mov.b32 $1, 0;\0A\09mov.b32 $2, 0;\0A\09mov.b32 $3, 0;\0A\09@$5 ld.global.v4.b32 { $0, $1, $2, $3 }, [ $4 + 0 ];", "=r,=r,=r,=r,l,b"
// LLVM:      llvm.inline_asm has_side_effects "@$5 st.global.v4.b32 [ $0 + 0 ], { $1, $2, $3, $4 };", "l,r,r,r,r,b"
// LLVM-NOT:  llvm.mlir.global
// 
// PTX:       .entry vadd(
// PTX:       .reqntid 128, 1, 1
// PTX-COUNT-4: ld.global.v4.b32
// PTX-COUNT-2: st.global.v4.b32
// PTX-NOT:   bar.sync

builtin.module attributes {tt.num_warps = 4 : i32} {
  func.func @vadd(%a: !tt.ptr<f32> {tt.divisibility = 16 : i32}, %b: !tt.ptr<f32> {tt.divisibility = 16 : i32}, %c: !tt.ptr<f32> {tt.divisibility = 16 : i32}, %n: i32 {tt.divisibility = 16 : i32}) {

    %pid = tt.program_id 0 : i32
    %bs = tt.constant 1024 : i32 -> i32
    %start = tt.mul %pid, %bs : i32
    %r = tt.arange 0 to 1024 : tensor<1024xi32>
    %s = tt.splat %start : i32 -> tensor<1024xi32>
    %offs = tt.add %s, %r : tensor<1024xi32>
    %ns = tt.splat %n : i32 -> tensor<1024xi32>
    %mask = tt.cmp "lt", %offs, %ns : tensor<1024xi32> -> tensor<1024xi1>
    %ap = tt.splat %a : !tt.ptr<f32> -> tensor<1024x!tt.ptr<f32>>
    %aps = tt.addptr %ap, %offs : tensor<1024x!tt.ptr<f32>>, tensor<1024xi32>
    %bp = tt.splat %b : !tt.ptr<f32> -> tensor<1024x!tt.ptr<f32>>
    %bps = tt.addptr %bp, %offs : tensor<1024x!tt.ptr<f32>>, tensor<1024xi32>
    %cp = tt.splat %c : !tt.ptr<f32> -> tensor<1024x!tt.ptr<f32>>
    %cps = tt.addptr %cp, %offs : tensor<1024x!tt.ptr<f32>>, tensor<1024xi32>
    %x = tt.load %aps mask %mask : tensor<1024x!tt.ptr<f32>>, tensor<1024xi1> -> tensor<1024xf32>
    %y = tt.load %bps mask %mask : tensor<1024x!tt.ptr<f32>>, tensor<1024xi1> -> tensor<1024xf32>
    %z = tt.add %x, %y : tensor<1024xf32>
    tt.store %cps, %z mask %mask : tensor<1024x!tt.ptr<f32>>, tensor<1024xf32>, tensor<1024xi1>
    func.return
  }
}
