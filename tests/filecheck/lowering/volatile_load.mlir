// Triton's `tl.load(p, volatile=True)`: `ld.volatile.global` (no cache qualifier: PTX takes none with it), and
// a load the passes must keep: a spin loop on a flag (`while load(flag) != v`) keeps its load through dce and
// reads memory on every iteration.
// RUN: tinyton-opt %s -p dce | filecheck %s --check-prefix=KEEP
// RUN: tinyton-opt %s -p tinyton-to-llvm | filecheck %s --check-prefix=LLVM
// REQUIRES: mlir-tools
// RUN: %if ptxas %{ tinyton-opt %s -p tinyton-to-llvm | mlir-translate --mlir-to-llvmir | llc -mtriple=nvptx64-nvidia-cuda -mcpu=sm_90 -mattr=+ptx80 -o %t.ptx && ptxas -arch=sm_90 %t.ptx -o %t.cubin %}

// KEEP:      scf.while
// KEEP:      tt.load %{{.*}} {volatile} : !tt.ptr<i32> -> i32
// KEEP-NOT:  tt.load %{{.*}} : !tt.ptr<i32> -> i32

// LLVM:      llvm.inline_asm has_side_effects "ld.volatile.global.b32 $0, [ $1 + 0 ];"

builtin.module attributes {tt.num_warps = 4 : i32} {
  func.func @wait(%flag: !tt.ptr<i32> {tt.divisibility = 16 : i32}, %v: i32) {
    scf.while () : () -> () {
      %x = tt.load %flag {volatile} : !tt.ptr<i32> -> i32
      %go = tt.cmp "ne", %x, %v : i32 -> i1
      scf.condition(%go)
    } do {
      scf.yield
    }
    %unused = tt.load %flag : !tt.ptr<i32> -> i32
    func.return
  }
}
