// RUN: kiln-opt %s --stage import | FileCheck %s

// CHLO has no dialect in the bundled bindings: jaxlib parses it and legalizes it to
// StableHLO (XLA's own decompositions), which arrives as a portable artifact.
// CHECK-LABEL: func.func @main
// CHECK-NOT: chlo.
// CHECK: stablehlo.log_plus_one
// CHECK-NOT: chlo.
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = chlo.erf_inv %x : tensor<4xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
