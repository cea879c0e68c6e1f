// RUN: kiln-opt %s --pass kiln-lower-linalg-ops --split-input-file | FileCheck %s

// Cholesky becomes a loop over columns of batched StableHLO (a matrix-vector product, a
// square root, dynamic updates).
// CHECK-LABEL: func.func @main
// CHECK-NOT: stablehlo.cholesky
// CHECK: scf.for
// CHECK: stablehlo.dot_general
// CHECK: stablehlo.sqrt
// CHECK: stablehlo.dynamic_update_slice
func.func @main(%a: tensor<3x3xf64>) -> tensor<3x3xf64> {
  %0 = "stablehlo.cholesky"(%a) {lower = true} : (tensor<3x3xf64>) -> tensor<3x3xf64>
  return %0 : tensor<3x3xf64>
}

// -----

// Without the ops this pass lowers, nothing changes.
// CHECK-LABEL: func.func @main
// CHECK-NEXT: stablehlo.negate
func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {
  %0 = stablehlo.negate %a : tensor<2xf32>
  return %0 : tensor<2xf32>
}
