// RUN: kiln-opt %s --pass kiln-protect-contractions --split-input-file | FileCheck %s

// A large f32 contraction moves into a private function of its own, as a linalg.contract,
// out of reach of elementwise fusion; the transpose that is its only user folds into its
// output map.
// CHECK-DAG: #[[OUT:.*]] = affine_map<(d0, d1, d2) -> (d1, d0)>
// CHECK-LABEL: func.func @main
// CHECK: call @kiln_contraction_0(%{{.*}}, %{{.*}}, %{{.*}}) : (tensor<256x96xf32>, tensor<256x80xf32>, tensor<80x96xf32>) -> tensor<80x96xf32>
// CHECK-LABEL: func.func private @kiln_contraction_0
// CHECK-SAME: kiln.outlined_contraction
// CHECK: linalg.contract indexing_maps = [#{{.*}}, #{{.*}}, #[[OUT]]]
#map = affine_map<(d0, d1, d2) -> (d2, d0)>
#map1 = affine_map<(d0, d1, d2) -> (d2, d1)>
#map2 = affine_map<(d0, d1, d2) -> (d0, d1)>
#map3 = affine_map<(d0, d1) -> (d1, d0)>
#map4 = affine_map<(d0, d1) -> (d0, d1)>
func.func @main(%arg0: tensor<256x96xf32>, %arg1: tensor<256x80xf32>) -> tensor<80x96xf32> {
  %cst = arith.constant 0.000000e+00 : f32
  %0 = tensor.empty() : tensor<96x80xf32>
  %1 = linalg.fill ins(%cst : f32) outs(%0 : tensor<96x80xf32>) -> tensor<96x80xf32>
  %2 = linalg.generic {indexing_maps = [#map, #map1, #map2], iterator_types = ["parallel", "parallel", "reduction"]} ins(%arg0, %arg1 : tensor<256x96xf32>, tensor<256x80xf32>) outs(%1 : tensor<96x80xf32>) {
  ^bb0(%in: f32, %in_0: f32, %out: f32):
    %5 = arith.mulf %in, %in_0 : f32
    %6 = arith.addf %out, %5 : f32
    linalg.yield %6 : f32
  } -> tensor<96x80xf32>
  %3 = tensor.empty() : tensor<80x96xf32>
  %4 = linalg.generic {indexing_maps = [#map3, #map4], iterator_types = ["parallel", "parallel"]} ins(%2 : tensor<96x80xf32>) outs(%3 : tensor<80x96xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  } -> tensor<80x96xf32>
  return %4 : tensor<80x96xf32>
}

// -----

// A small product stays where it is.
// CHECK-LABEL: func.func @main
// CHECK-NOT: call
// CHECK: linalg.matmul
func.func @main(%a: tensor<2x2xf32>, %b: tensor<2x2xf32>, %c: tensor<2x2xf32>) -> tensor<2x2xf32> {
  %0 = linalg.matmul ins(%a, %b : tensor<2x2xf32>, tensor<2x2xf32>) outs(%c : tensor<2x2xf32>) -> tensor<2x2xf32>
  return %0 : tensor<2x2xf32>
}
