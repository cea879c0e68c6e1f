// RUN: kiln-opt %s | FileCheck %s
// RUN: kiln-opt %s --stage import | FileCheck %s

// The import stage is the program as parsed into StableHLO, nothing changed.
// CHECK-LABEL: func.func @main
// CHECK: stablehlo.add
// CHECK: call @helper
func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.add %a, %a : tensor<4xf32>
  %1 = call @helper(%0) : (tensor<4xf32>) -> tensor<4xf32>
  return %1 : tensor<4xf32>
}
func.func private @helper(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.tanh %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}
