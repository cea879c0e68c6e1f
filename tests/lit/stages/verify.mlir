// RUN: kiln-opt %s --stage verify | FileCheck %s
// RUN: not kiln-opt %s --stage verify --entry nothere 2>&1 | FileCheck %s --check-prefix=NOENTRY

// verify passes valid programs through unchanged.
// CHECK-LABEL: func.func @main
// CHECK-NEXT: stablehlo.multiply
// NOENTRY: kiln-opt: error: no function named 'nothere' (functions in the module: main)
func.func @main(%a: tensor<2x3xi32>) -> tensor<2x3xi32> {
  %0 = stablehlo.multiply %a, %a : tensor<2x3xi32>
  return %0 : tensor<2x3xi32>
}
