// RUN: kiln-opt %s --stage import | FileCheck %s

// MHLO ops convert through jaxlib's hlo-legalize-to-stablehlo; `mhlo.*` attributes on a
// StableHLO module do not make it MHLO.
// CHECK-LABEL: func.func @main
// CHECK: stablehlo.add
// CHECK: stablehlo.multiply
// CHECK-NOT: mhlo.add
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = mhlo.add %x, %x : tensor<4xf32>
  %1 = "mhlo.multiply"(%0, %x) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %1 : tensor<4xf32>
}
