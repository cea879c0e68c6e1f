// RUN: kiln-opt %s --pass kiln-fold-tuples --split-input-file | FileCheck %s

// get_tuple_element of a tuple is the tuple's operand; the dead tuple goes away.
// CHECK-LABEL: func.func @main
// CHECK-SAME: (%[[A:.*]]: tensor<2xf32>, %[[B:.*]]: tensor<3xi32>)
// CHECK-NOT: stablehlo.tuple
// CHECK-NOT: stablehlo.get_tuple_element
// CHECK: return %[[B]], %[[A]]
func.func @main(%a: tensor<2xf32>, %b: tensor<3xi32>) -> (tensor<3xi32>, tensor<2xf32>) {
  %t = stablehlo.tuple %a, %b : tuple<tensor<2xf32>, tensor<3xi32>>
  %0 = stablehlo.get_tuple_element %t[1] : (tuple<tensor<2xf32>, tensor<3xi32>>) -> tensor<3xi32>
  %1 = stablehlo.get_tuple_element %t[0] : (tuple<tensor<2xf32>, tensor<3xi32>>) -> tensor<2xf32>
  return %0, %1 : tensor<3xi32>, tensor<2xf32>
}

// -----

// Without tuples nothing changes.
// CHECK-LABEL: func.func @main
// CHECK-NEXT: stablehlo.negate
func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {
  %0 = stablehlo.negate %a : tensor<2xf32>
  return %0 : tensor<2xf32>
}
