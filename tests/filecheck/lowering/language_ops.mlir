// The Triton language ops (tl.exp2 ... tl.erf, fma, div_rn, umulhi, bitcast, join/split, trans, reshape,
// tl.reduce with a combine region, argmax, cumsum, device_assert, multiple_of, cache hints): generated
// by the frontend from a kernel, lowered to PTX and accepted by ptxas. (The reshape reuses registers: no
// shared memory, no barrier.)
// RUN: tinyton-opt %s --print-op-generic | tinyton-opt | filecheck %s --check-prefix=IR
// REQUIRES: mlir-tools
// RUN: tinyton-opt %s -p tinyton-to-llvm | mlir-translate --mlir-to-llvmir | llc -mtriple=nvptx64-nvidia-cuda -mcpu=sm_90 -mattr=+ptx80 | filecheck %s --check-prefix=PTX
// RUN: %if ptxas %{ tinyton-opt %s -p tinyton-to-llvm | mlir-translate --mlir-to-llvmir | llc -mtriple=nvptx64-nvidia-cuda -mcpu=sm_90 -mattr=+ptx80 -o %t.ptx && ptxas -arch=sm_90 %t.ptx -o %t.cubin %}

// IR:      tt.load %{{.*}} {cache = ".cg"}
// IR:      tt.hint %{{.*}} {divisibility = 16 : i32}
// IR:      tt.load %{{.*}} {evict = "evict_first"}
// IR-DAG:  tt.exp2
// IR-DAG:  tt.log2
// IR-DAG:  tt.erf
// IR-DAG:  tt.sqrt_rn
// IR:      tt.fma
// IR:      tt.umulhi
// IR:      tt.bitcast %{{.*}} : tensor<16x32xi32> -> tensor<16x32xf32>
// IR:      tt.join %{{.*}}, %{{.*}} : tensor<16x32xf32> -> tensor<16x32x2xf32>
// IR:      tt.split
// IR:      tt.trans %{{.*}} {order = array<i32: 1, 0>} : tensor<16x32xf32> -> tensor<32x16xf32>
// IR:      tt.store %{{.*}}, %{{.*}} {cache = ".cs"}
// IR:      "tt.reduce"
// IR:      tt.combine_yield %{{.*}} : i32
// IR:      tt.assert %{{.*}}, "{{.*}}sum too small"
// IR:      "tt.scan"
// IR:      tt.reshape %{{.*}} : tensor<16x32xi32> -> tensor<512xi32>

// PTX-DAG: ld.global.cg.
// PTX-DAG: ld.global.L1::evict_first.
// PTX-DAG: st.global.cs.
// PTX-DAG: ex2.approx.f32
// PTX-DAG: lg2.approx.f32
// PTX-DAG: cvt.rni.f32.f32
// PTX-DAG: cvt.rmi.f64.f64
// PTX-DAG: cvt.rmi.f32.f32
// PTX-DAG: cvt.rpi.f32.f32
// PTX-DAG: sqrt.rn.f32
// PTX-DAG: div.rn.f32
// PTX-DAG: fma.rn.f32
// PTX-DAG: mul.hi.u32
// PTX-DAG: shfl.sync.bfly.b32
// PTX-DAG: trap;

builtin.module attributes {tt.num_warps = 4 : i32} {
  func.func @language_ops(%x_ptr: !tt.ptr<f32> {tt.divisibility = 16 : i32}, %i_ptr: !tt.ptr<i32> {tt.divisibility = 16 : i32}, %o_ptr: !tt.ptr<f32> {tt.divisibility = 16 : i32}, %oi_ptr: !tt.ptr<i32> {tt.divisibility = 16 : i32}) {
    %0 = tt.arange 0 to 16 : tensor<16xi32>
    %1 = tt.expand_dims %0 axis = 1 : tensor<16xi32> -> tensor<16x1xi32>
    %2 = tt.arange 0 to 32 : tensor<32xi32>
    %3 = tt.expand_dims %2 axis = 0 : tensor<32xi32> -> tensor<1x32xi32>
    %4 = tt.constant 32 : i32 -> tensor<16x1xi32>
    %5 = tt.mul %1, %4 : tensor<16x1xi32>
    %6 = tt.splat %x_ptr : !tt.ptr<f32> -> tensor<16x1x!tt.ptr<f32>>
    %7 = tt.addptr %6, %5 : tensor<16x1x!tt.ptr<f32>>, tensor<16x1xi32>
    %8 = tt.broadcast %3 : tensor<1x32xi32> -> tensor<16x32xi32>
    %9 = tt.broadcast %7 : tensor<16x1x!tt.ptr<f32>> -> tensor<16x32x!tt.ptr<f32>>
    %10 = tt.addptr %9, %8 : tensor<16x32x!tt.ptr<f32>>, tensor<16x32xi32>
    %11 = tt.load %10 {cache = ".cg"} : tensor<16x32x!tt.ptr<f32>> -> tensor<16x32xf32>
    %12 = tt.splat %i_ptr : !tt.ptr<i32> -> tensor<16x1x!tt.ptr<i32>>
    %13 = tt.addptr %12, %5 : tensor<16x1x!tt.ptr<i32>>, tensor<16x1xi32>
    %14 = tt.broadcast %13 : tensor<16x1x!tt.ptr<i32>> -> tensor<16x32x!tt.ptr<i32>>
    %15 = tt.addptr %14, %8 : tensor<16x32x!tt.ptr<i32>>, tensor<16x32xi32>
    %16 = tt.hint %15 {divisibility = 16 : i32} : tensor<16x32x!tt.ptr<i32>>
    %17 = tt.load %16 {evict = "evict_first"} : tensor<16x32x!tt.ptr<i32>> -> tensor<16x32xi32>
    %18 = tt.exp2 %11 : tensor<16x32xf32>
    %19 = tt.log2 %11 : tensor<16x32xf32>
    %20 = tt.add %18, %19 : tensor<16x32xf32>
    %21 = tt.sin %11 : tensor<16x32xf32>
    %22 = tt.add %20, %21 : tensor<16x32xf32>
    %23 = tt.cos %11 : tensor<16x32xf32>
    %24 = tt.add %22, %23 : tensor<16x32xf32>
    %25 = tt.floor %11 : tensor<16x32xf32>
    %26 = tt.add %24, %25 : tensor<16x32xf32>
    %27 = tt.ceil %11 : tensor<16x32xf32>
    %28 = tt.add %26, %27 : tensor<16x32xf32>
    %29 = tt.erf %11 : tensor<16x32xf32>
    %30 = tt.add %28, %29 : tensor<16x32xf32>
    %31 = tt.sqrt_rn %11 : tensor<16x32xf32>
    %32 = tt.add %30, %31 : tensor<16x32xf32>
    %33 = tt.div_rn %11, %32 : tensor<16x32xf32>
    %34 = tt.fma %32, %11, %33 : tensor<16x32xf32>
    %35 = tt.umulhi %17, %17 : tensor<16x32xi32>
    %36 = tt.cast %35 : tensor<16x32xi32> -> tensor<16x32xf32>
    %37 = tt.add %34, %36 : tensor<16x32xf32>
    %38 = tt.bitcast %17 : tensor<16x32xi32> -> tensor<16x32xf32>
    %39 = tt.add %37, %38 : tensor<16x32xf32>
    %40 = tt.join %39, %11 : tensor<16x32xf32> -> tensor<16x32x2xf32>
    %41, %42 = tt.split %40 : tensor<16x32x2xf32> -> tensor<16x32xf32>
    %43 = tt.add %41, %42 : tensor<16x32xf32>
    %44 = tt.trans %43 {order = array<i32: 1, 0>} : tensor<16x32xf32> -> tensor<32x16xf32>
    %45 = tt.expand_dims %2 axis = 1 : tensor<32xi32> -> tensor<32x1xi32>
    %46 = tt.constant 16 : i32 -> tensor<32x1xi32>
    %47 = tt.mul %45, %46 : tensor<32x1xi32>
    %48 = tt.splat %o_ptr : !tt.ptr<f32> -> tensor<32x1x!tt.ptr<f32>>
    %49 = tt.addptr %48, %47 : tensor<32x1x!tt.ptr<f32>>, tensor<32x1xi32>
    %50 = tt.expand_dims %0 axis = 0 : tensor<16xi32> -> tensor<1x16xi32>
    %51 = tt.broadcast %50 : tensor<1x16xi32> -> tensor<32x16xi32>
    %52 = tt.broadcast %49 : tensor<32x1x!tt.ptr<f32>> -> tensor<32x16x!tt.ptr<f32>>
    %53 = tt.addptr %52, %51 : tensor<32x16x!tt.ptr<f32>>, tensor<32x16xi32>
    tt.store %53, %44 {cache = ".cs"} : tensor<32x16x!tt.ptr<f32>>, tensor<32x16xf32>
    %54 = "tt.reduce"(%17) <{axis = 1 : i32}> ({
    ^bb0(%55: i32, %56: i32):
      %57 = tt.add %55, %56 : i32
      tt.combine_yield %57 : i32
    }) : (tensor<16x32xi32>) -> tensor<16xi32>
    %58, %59 = "tt.reduce"(%11, %8) <{axis = 1 : i32}> ({
    ^bb0(%60: f32, %61: i32, %62: f32, %63: i32):
      %64 = tt.cmp "eq", %60, %62 : f32 -> i1
      %65 = tt.cmp "ne", %60, %60 : f32 -> i1
      %66 = tt.cmp "ne", %62, %62 : f32 -> i1
      %67 = tt.and %65, %66 : i1
      %68 = tt.or %64, %67 : i1
      %69 = tt.cmp "lt", %61, %63 : i32 -> i1
      %70 = tt.and %68, %69 : i1
      %71 = tt.cmp "gt", %60, %62 : f32 -> i1
      %72 = tt.cmp "eq", %62, %62 : f32 -> i1
      %73 = tt.and %65, %72 : i1
      %74 = tt.or %71, %73 : i1
      %75 = tt.or %74, %70 : i1
      %76 = tt.select %75, %60, %62 : i1, f32
      %77 = tt.select %75, %61, %63 : i1, i32
      tt.combine_yield %76, %77 : f32, i32
    }) : (tensor<16x32xf32>, tensor<16x32xi32>) -> (tensor<16xf32>, tensor<16xi32>)
    %78 = tt.add %54, %59 : tensor<16xi32>
    %79 = tt.constant -1000000 : i32 -> tensor<16xi32>
    %80 = tt.cmp "gt", %78, %79 : tensor<16xi32> -> tensor<16xi1>
    tt.assert %80, "/tmp/tlgen/gen.py:22: sum too small" : tensor<16xi1>
    %81 = "tt.scan"(%17) <{axis = 1 : i32, reverse = false}> ({
    ^bb0(%82: i32, %83: i32):
      %84 = tt.add %82, %83 : i32
      tt.combine_yield %84 : i32
    }) : (tensor<16x32xi32>) -> tensor<16x32xi32>
    %85 = tt.arange 0 to 512 : tensor<512xi32>
    %86 = tt.splat %oi_ptr : !tt.ptr<i32> -> tensor<512x!tt.ptr<i32>>
    %87 = tt.addptr %86, %85 : tensor<512x!tt.ptr<i32>>, tensor<512xi32>
    %88 = tt.reshape %81 : tensor<16x32xi32> -> tensor<512xi32>
    tt.store %87, %88 : tensor<512x!tt.ptr<i32>>, tensor<512xi32>
    %89 = tt.splat %oi_ptr : !tt.ptr<i32> -> tensor<16x!tt.ptr<i32>>
    %90 = tt.addptr %89, %0 : tensor<16x!tt.ptr<i32>>, tensor<16xi32>
    tt.store %90, %78 : tensor<16x!tt.ptr<i32>>, tensor<16xi32>
    func.return
  }
}
