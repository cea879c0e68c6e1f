// RUN: kiln-opt %s --pass kiln-flatten-entry-tuples --split-input-file | FileCheck %s

// Tuple parameters and results of the entry become flat lists of tensors, in order.
// CHECK-LABEL: func.func @main
// CHECK-SAME: (%{{.*}}: tensor<2xf32>, %{{.*}}: tensor<3xi32>, %{{.*}}: tensor<f32>)
// CHECK-SAME: -> (tensor<3xi32>, tensor<2xf32>)
// CHECK-NOT: tuple<
func.func @main(%t: tuple<tensor<2xf32>, tensor<3xi32>>, %s: tensor<f32>) -> tuple<tensor<3xi32>, tensor<2xf32>> {
  %0 = stablehlo.get_tuple_element %t[1] : (tuple<tensor<2xf32>, tensor<3xi32>>) -> tensor<3xi32>
  %1 = stablehlo.get_tuple_element %t[0] : (tuple<tensor<2xf32>, tensor<3xi32>>) -> tensor<2xf32>
  %r = stablehlo.tuple %0, %1 : tuple<tensor<3xi32>, tensor<2xf32>>
  return %r : tuple<tensor<3xi32>, tensor<2xf32>>
}

// -----

// An entry without tuples is unchanged.
// CHECK-LABEL: func.func @main
// CHECK-SAME: (%{{.*}}: tensor<2xf32>) -> tensor<2xf32>
func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {
  return %a : tensor<2xf32>
}
