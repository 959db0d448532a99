// Triton's eviction_policy: "evict_last"/"evict_first" give the access an L1 priority and an L2 policy
// register, as Triton emits them on sm_80 and later (`createpolicy.fractional.L2::evict_last.b64 $0, 1.0`,
// then `ld.global.L1::evict_last.L2::cache_hint ... , policy`): one policy per op, without side effects. A
// masked load with `other` keeps its operand order (words, address, other words, policy, predicate).
// RUN: tinyton-opt %s -p tinyton-to-llvm | filecheck %s --check-prefix=LLVM
// RUN: tinyton-opt %s -p tinyton-to-llvm{arch=sm_75} | filecheck %s --check-prefix=SM75
// REQUIRES: mlir-tools
// RUN: tinyton-opt %s -p tinyton-to-llvm | mlir-translate --mlir-to-llvmir | llc -mtriple=nvptx64-nvidia-cuda -mcpu=sm_90 -mattr=+ptx80 | filecheck %s --check-prefix=PTX
// RUN: %if ptxas %{ tinyton-opt %s -p tinyton-to-llvm | mlir-translate --mlir-to-llvmir | llc -mtriple=nvptx64-nvidia-cuda -mcpu=sm_90 -mattr=+ptx80 -o %t.ptx && ptxas -arch=sm_90 %t.ptx -o %t.cubin %}

// LLVM:      %[[P0:.+]] = llvm.inline_asm "createpolicy.fractional.L2::evict_last.b64 $0, 1.0;", "=l" : () -> i64
// LLVM:      llvm.inline_asm has_side_effects "ld.global.L1::evict_last.L2::cache_hint.v4.b32 { $0, $1, $2, $3 }, [ $4 + 0 ], $5;", "=r,=r,=r,=r,l,l" %{{.+}}, %[[P0]]
// LLVM:      %[[P1:.+]] = llvm.inline_asm "createpolicy.fractional.L2::evict_first.b64 $0, 1.0;", "=l"
// LLVM:      llvm.inline_asm has_side_effects "mov.b32 $0, $5;{{.*}}@$10 ld.global.L1::evict_first.L2::cache_hint.v4.b32 { $0, $1, $2, $3 }, [ $4 + 0 ], $9;", "=r,=r,=r,=r,l,r,r,r,r,l,b" {{.*}}, %[[P1]], %{{.+}}
// LLVM:      %[[P2:.+]] = llvm.inline_asm "createpolicy.fractional.L2::evict_first.b64 $0, 1.0;", "=l"
// LLVM:      llvm.inline_asm has_side_effects "@$6 st.global.L1::evict_first.L2::cache_hint.v4.b32 [ $0 + 0 ], { $1, $2, $3, $4 }, $5;", "l,r,r,r,r,l,b" {{.*}}, %[[P2]], %{{.+}}
// LLVM:      llvm.inline_asm has_side_effects "st.global.cs.v4.b32 [ $0 + 0 ], { $1, $2, $3, $4 };"

// SM75-NOT:  createpolicy
// SM75-NOT:  cache_hint
// SM75:      ld.global.L1::evict_last.v4.b32

// PTX:       createpolicy.fractional.L2::evict_last.b64 [[P:%rd[0-9]+]], 1.0;
// PTX:       ld.global.L1::evict_last.L2::cache_hint.v4.b32 {{.*}}, [[P]];
// PTX:       createpolicy.fractional.L2::evict_first.b64
// PTX:       ld.global.L1::evict_first.L2::cache_hint.v4.b32
// PTX:       st.global.L1::evict_first.L2::cache_hint.v4.b32
// PTX:       st.global.cs.v4.b32

builtin.module attributes {tt.num_warps = 4 : i32} {
  func.func @hints(%a: !tt.ptr<f32> {tt.divisibility = 16 : i32}, %b: !tt.ptr<f32> {tt.divisibility = 16 : i32}, %c: !tt.ptr<f32> {tt.divisibility = 16 : i32}, %n: i32 {tt.divisibility = 16 : i32}) {
    %r = tt.arange 0 to 512 : tensor<512xi32>
    %ns = tt.splat %n : i32 -> tensor<512xi32>
    %mask = tt.cmp "lt", %r, %ns : tensor<512xi32> -> tensor<512xi1>
    %ap = tt.splat %a : !tt.ptr<f32> -> tensor<512x!tt.ptr<f32>>
    %aps = tt.addptr %ap, %r : tensor<512x!tt.ptr<f32>>, tensor<512xi32>
    %bp = tt.splat %b : !tt.ptr<f32> -> tensor<512x!tt.ptr<f32>>
    %bps = tt.addptr %bp, %r : tensor<512x!tt.ptr<f32>>, tensor<512xi32>
    %cp = tt.splat %c : !tt.ptr<f32> -> tensor<512x!tt.ptr<f32>>
    %cps = tt.addptr %cp, %r : tensor<512x!tt.ptr<f32>>, tensor<512xi32>
    %x = tt.load %aps {evict = "evict_last"} : tensor<512x!tt.ptr<f32>> -> tensor<512xf32>
    %y = tt.load %bps mask %mask other %x {evict = "evict_first"} : tensor<512x!tt.ptr<f32>>, tensor<512xi1>, tensor<512xf32> -> tensor<512xf32>
    %z = tt.add %x, %y : tensor<512xf32>
    tt.store %cps, %z mask %mask {evict = "evict_first"} : tensor<512x!tt.ptr<f32>>, tensor<512xf32>, tensor<512xi1>
    tt.store %cps, %z {cache = ".cs"} : tensor<512x!tt.ptr<f32>>, tensor<512xf32>
    func.return
  }
}
