// RUN: kiln-opt %s --stage legalize | FileCheck %s

// legalize turns StableHLO into linalg on tensors; unsigned types become signless after
// their signedness chose the operation (here: unsigned division).
// CHECK-LABEL: func.func @main
// CHECK-SAME: (%{{.*}}: tensor<8xi32>, %{{.*}}: tensor<8xi32>) -> tensor<8xi32>
// CHECK: linalg.generic
// CHECK: arith.divui
// CHECK-NOT: stablehlo.
func.func @main(%a: tensor<8xui32>, %b: tensor<8xui32>) -> tensor<8xui32> {
  %0 = stablehlo.divide %a, %b : tensor<8xui32>
  return %0 : tensor<8xui32>
}
