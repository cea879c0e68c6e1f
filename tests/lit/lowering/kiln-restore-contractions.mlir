// RUN: kiln-opt %s --pass kiln-restore-contractions --split-input-file | FileCheck %s

// The contractions kiln-protect-contractions outlined are inlined back after fusion.
// CHECK-LABEL: func.func @main
// CHECK-NOT: call
// CHECK: linalg.contract
// CHECK-NOT: kiln_contraction_0
#map = affine_map<(d0, d1, d2) -> (d2, d0)>
#map1 = affine_map<(d0, d1, d2) -> (d2, d1)>
#map2 = affine_map<(d0, d1, d2) -> (d1, d0)>
func.func @main(%arg0: tensor<256x96xf32>, %arg1: tensor<256x80xf32>) -> tensor<80x96xf32> {
  %cst = arith.constant 0.000000e+00 : f32
  %3 = tensor.empty() : tensor<80x96xf32>
  %4 = linalg.fill ins(%cst : f32) outs(%3 : tensor<80x96xf32>) -> tensor<80x96xf32>
  %5 = call @kiln_contraction_0(%arg0, %arg1, %4) : (tensor<256x96xf32>, tensor<256x80xf32>, tensor<80x96xf32>) -> tensor<80x96xf32>
  return %5 : tensor<80x96xf32>
}
func.func private @kiln_contraction_0(%arg0: tensor<256x96xf32>, %arg1: tensor<256x80xf32>, %arg2: tensor<80x96xf32>) -> tensor<80x96xf32> attributes {kiln.outlined_contraction} {
  %0 = linalg.contract indexing_maps = [#map, #map1, #map2] ins(%arg0, %arg1 : tensor<256x96xf32>, tensor<256x80xf32>) outs(%arg2 : tensor<80x96xf32>) -> tensor<80x96xf32>
  return %0 : tensor<80x96xf32>
}

// -----

// Calls of other functions stay calls.
// CHECK-LABEL: func.func @main
// CHECK: call @helper
func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {
  %0 = call @helper(%a) : (tensor<2xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}
func.func private @helper(%a: tensor<2xf32>) -> tensor<2xf32> {
  return %a : tensor<2xf32>
}
