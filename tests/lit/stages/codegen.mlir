// RUN: kiln-opt %s --stage codegen | FileCheck %s

// codegen turns linalg into loops.
// CHECK-LABEL: func.func @main
// CHECK: scf.for
// CHECK: scf.for
// CHECK: arith.maximumf
// CHECK-NOT: linalg.
func.func @main(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = stablehlo.maximum %a, %b : tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}
