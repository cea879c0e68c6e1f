// RUN: kiln-opt %s --pass kiln-reassociate-reductions --split-input-file | FileCheck %s

// The accumulating addf of a float reduction may be reassociated (the spec leaves the
// order to the implementation), which lets LLVM vectorize the loop.
// CHECK-LABEL: func.func @main
// CHECK: arith.addf %{{.*}}, %{{.*}} fastmath<reassoc> : f32
#map = affine_map<(d0, d1) -> (d0, d1)>
#map1 = affine_map<(d0, d1) -> (d0)>
func.func @main(%arg0: memref<4x8xf32>, %arg1: memref<4xf32>) {
  linalg.generic {indexing_maps = [#map, #map1], iterator_types = ["parallel", "reduction"]} ins(%arg0 : memref<4x8xf32>) outs(%arg1 : memref<4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = arith.addf %out, %in : f32
    linalg.yield %0 : f32
  }
  return
}

// -----

// Elementwise arithmetic keeps its exact order.
// CHECK-LABEL: func.func @main
// CHECK: arith.addf %{{.*}}, %{{.*}} : f32
#map = affine_map<(d0) -> (d0)>
func.func @main(%arg0: memref<8xf32>, %arg1: memref<8xf32>) {
  linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]} ins(%arg0 : memref<8xf32>) outs(%arg1 : memref<8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = arith.addf %in, %in : f32
    linalg.yield %0 : f32
  }
  return
}
