// RUN: kiln-opt %s --pass kiln-approximate-math --split-input-file | FileCheck %s

// f32 math.exp in a linalg body becomes a polynomial (plain arithmetic LLVM vectorizes).
// CHECK-LABEL: func.func @main
// CHECK: linalg.generic
// CHECK-NOT: math.exp
// CHECK: arith.mulf
// CHECK: linalg.yield
#map = affine_map<(d0) -> (d0)>
func.func @main(%arg0: memref<8xf32>, %arg1: memref<8xf32>) {
  linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]} ins(%arg0 : memref<8xf32>) outs(%arg1 : memref<8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = math.exp %in : f32
    linalg.yield %0 : f32
  }
  return
}

// -----

// f64 exp and log become f64 arithmetic too (f64math.py: within 1 ulp): a rounded multiple
// of ln2 taken off, exponent bits for 2^k; log's f / (2 + f) is an f64 divide. Other f64
// math (sin here) keeps libm's op.
// CHECK-LABEL: func.func @main
// CHECK-NOT: math.exp
// CHECK: math.roundeven {{.*}} : f64
// CHECK: arith.shli {{.*}} : i64
// CHECK: arith.bitcast {{.*}} : i64 to f64
// CHECK-NOT: math.log %
// CHECK: arith.divf {{.*}} : f64
// CHECK: math.sin %{{.*}} : f64
#map = affine_map<(d0) -> (d0)>
func.func @main(%arg0: memref<8xf64>, %arg1: memref<8xf64>) {
  linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]} ins(%arg0 : memref<8xf64>) outs(%arg1 : memref<8xf64>) {
  ^bb0(%in: f64, %out: f64):
    %0 = math.exp %in : f64
    %1 = math.log %0 : f64
    %2 = math.sin %1 : f64
    linalg.yield %2 : f64
  }
  return
}

// -----

// f32 math.log becomes arithmetic on the exponent bits and a polynomial; log1p (math.log1p
// and the libm log1pf call kiln-accurate-libm-calls makes) becomes f64 arithmetic (widened.py:
// within 0.5 ulp, which complex log1p needs).
// CHECK-LABEL: func.func @logs
// CHECK-NOT: math.log
// CHECK-NOT: call @log1pf
// CHECK: arith.shrui
// CHECK: math.fma
// CHECK: arith.extf {{.*}} : f32 to f64
// CHECK: arith.truncf {{.*}} : f64 to f32
// CHECK: arith.extf {{.*}} : f32 to f64
// CHECK: arith.truncf {{.*}} : f64 to f32
// CHECK: linalg.yield
#map = affine_map<(d0) -> (d0)>
func.func private @log1pf(f32) -> f32
func.func @logs(%arg0: memref<8xf32>, %arg1: memref<8xf32>) {
  linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]} ins(%arg0 : memref<8xf32>) outs(%arg1 : memref<8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = math.log %in : f32
    %1 = math.log1p %0 : f32
    %2 = func.call @log1pf(%1) : (f32) -> f32
    linalg.yield %2 : f32
  }
  return
}
