// RUN: kiln-opt %s --pass-pipeline 'builtin.module(kiln-fuse-shared-elementwise,linalg-fuse-elementwise-ops,canonicalize,cse)' --split-input-file | FileCheck %s

// %a is read by two consumers: %b gets a copy of its body; %a, then left with one user,
// fuses upstream. %b is a result, so %c reads it.
// CHECK-LABEL: func.func @shared
// CHECK-COUNT-2: linalg.generic
// CHECK-NOT: linalg.generic
// CHECK: return
#map = affine_map<(d0) -> (d0)>
func.func @shared(%x: tensor<16xi32>, %y: tensor<16xi32>) -> (tensor<16xi32>, tensor<16xi32>) {
  %e = tensor.empty() : tensor<16xi32>
  %a = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel"]} ins(%x, %y : tensor<16xi32>, tensor<16xi32>) outs(%e : tensor<16xi32>) {
  ^bb0(%i: i32, %j: i32, %o: i32):
    %s = arith.addi %i, %j : i32
    linalg.yield %s : i32
  } -> tensor<16xi32>
  %b = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel"]} ins(%a, %y : tensor<16xi32>, tensor<16xi32>) outs(%e : tensor<16xi32>) {
  ^bb0(%i: i32, %j: i32, %o: i32):
    %s = arith.xori %i, %j : i32
    linalg.yield %s : i32
  } -> tensor<16xi32>
  %c = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel"]} ins(%a, %b : tensor<16xi32>, tensor<16xi32>) outs(%e : tensor<16xi32>) {
  ^bb0(%i: i32, %j: i32, %o: i32):
    %s = arith.muli %i, %j : i32
    linalg.yield %s : i32
  } -> tensor<16xi32>
  return %b, %c : tensor<16xi32>, tensor<16xi32>
}

// -----

// A transcendental producer is not duplicated.
// CHECK-LABEL: func.func @expensive
// CHECK-COUNT-3: linalg.generic
#map = affine_map<(d0) -> (d0)>
func.func @expensive(%x: tensor<16xf32>) -> (tensor<16xf32>, tensor<16xf32>) {
  %e = tensor.empty() : tensor<16xf32>
  %a = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]} ins(%x : tensor<16xf32>) outs(%e : tensor<16xf32>) {
  ^bb0(%i: f32, %o: f32):
    %s = math.exp %i : f32
    linalg.yield %s : f32
  } -> tensor<16xf32>
  %b = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]} ins(%a : tensor<16xf32>) outs(%e : tensor<16xf32>) {
  ^bb0(%i: f32, %o: f32):
    %s = arith.addf %i, %i : f32
    linalg.yield %s : f32
  } -> tensor<16xf32>
  %c = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]} ins(%a : tensor<16xf32>) outs(%e : tensor<16xf32>) {
  ^bb0(%i: f32, %o: f32):
    %s = arith.mulf %i, %i : f32
    linalg.yield %s : f32
  } -> tensor<16xf32>
  return %b, %c : tensor<16xf32>, tensor<16xf32>
}
