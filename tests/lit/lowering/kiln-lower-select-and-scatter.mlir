// RUN: kiln-opt %s --pass kiln-lower-select-and-scatter --split-input-file | FileCheck %s

// stablehlo.select_and_scatter becomes loops: over the source, then over each window to
// select an element (select region), whose result element is combined (scatter region).
// CHECK-LABEL: func.func @main
// CHECK-NOT: stablehlo.select_and_scatter
// CHECK: scf.for
// CHECK: stablehlo.compare GE, %{{.*}}, %{{.*}} : (tensor<i64>, tensor<i64>) -> tensor<i1>
// CHECK: stablehlo.add %{{.*}}, %{{.*}} : tensor<i64>
func.func @main(%operand: tensor<4x2xi64>, %source: tensor<2x2xi64>, %init: tensor<i64>) -> tensor<4x2xi64> {
  %0 = "stablehlo.select_and_scatter"(%operand, %source, %init) ({
  ^bb0(%a: tensor<i64>, %b: tensor<i64>):
    %ge = stablehlo.compare GE, %a, %b : (tensor<i64>, tensor<i64>) -> tensor<i1>
    stablehlo.return %ge : tensor<i1>
  }, {
  ^bb0(%a: tensor<i64>, %b: tensor<i64>):
    %s = stablehlo.add %a, %b : tensor<i64>
    stablehlo.return %s : tensor<i64>
  }) {window_dimensions = array<i64: 3, 1>, window_strides = array<i64: 2, 1>,
      padding = dense<[[0, 1], [0, 0]]> : tensor<2x2xi64>} : (tensor<4x2xi64>, tensor<2x2xi64>, tensor<i64>) -> tensor<4x2xi64>
  return %0 : tensor<4x2xi64>
}

// -----

// Without the ops this pass lowers, nothing changes.
// CHECK-LABEL: func.func @main
// CHECK-NEXT: stablehlo.negate
func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {
  %0 = stablehlo.negate %a : tensor<2xf32>
  return %0 : tensor<2xf32>
}
