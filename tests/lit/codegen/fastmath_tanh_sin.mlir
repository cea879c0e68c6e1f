// RUN: kiln-opt %s --pass kiln-approximate-math --split-input-file | FileCheck %s

// f32 tanh is f32 arithmetic (no f64) in one form, u / (u + 2) with u = expm1(2|x|), no
// select; the sign goes on last. The function asks LLVM for 512-bit vectors.
// CHECK-LABEL: func.func @tanh
// CHECK-SAME: llvm.passthrough = {{\[\[}}"prefer-vector-width", "512"]]
// CHECK-NOT: math.tanh
// CHECK-NOT: f64
// CHECK: math.absf
// CHECK: arith.minimumf
// CHECK-NOT: arith.select
// CHECK: arith.divf {{.*}} : f32
// CHECK-NOT: arith.select
// CHECK: math.copysign
// CHECK: linalg.yield
#map = affine_map<(d0) -> (d0)>
func.func @tanh(%arg0: memref<8xf32>, %arg1: memref<8xf32>) {
  linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]} ins(%arg0 : memref<8xf32>) outs(%arg1 : memref<8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = math.tanh %in : f32
    linalg.yield %0 : f32
  }
  return
}

// -----

// sin(pi * frac(|x|)), as lgamma's reflection computes it: the argument stays within
// [0, 2 pi], so the reduction is two fmas with pi/2 in two parts, no table (no gathers).
// An argument with no known bound keeps the table.
// CHECK-LABEL: func.func @bounded
// CHECK-NOT: memref.get_global
// CHECK: arith.trunci {{.*}} : i64 to i32
// CHECK: memref.get_global @__kiln_trig_reduction
// CHECK-NOT: memref.get_global
// CHECK: linalg.yield
#map = affine_map<(d0) -> (d0)>
func.func @bounded(%arg0: memref<8xf32>, %arg1: memref<8xf32>, %arg2: memref<8xf32>) {
  linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel"]} ins(%arg0 : memref<8xf32>) outs(%arg1, %arg2 : memref<8xf32>, memref<8xf32>) {
  ^bb0(%in: f32, %out: f32, %out2: f32):
    %pi = arith.constant 3.14159274 : f32
    %a = math.absf %in : f32
    %f = math.floor %a : f32
    %frac = arith.subf %a, %f : f32
    %arg = arith.mulf %frac, %pi : f32
    %0 = math.sin %arg : f32
    %1 = math.sin %in : f32
    linalg.yield %0, %1 : f32, f32
  }
  return
}
