// RUN: kiln-opt %s --stage legalize | FileCheck %s

// Scatter becomes a loop over the update scatter indices carrying the result, a bounds
// check of the whole window (XLA skips out-of-bounds updates), and an inner loop over the
// window whose body is the update computation on scalars.
// CHECK-LABEL: func.func @main
// CHECK: scf.for %[[P:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[ACC:.*]] = %arg0) -> (tensor<5x3xf32>)
// CHECK: %[[I:.*]] = tensor.extract %arg1[%[[P]], %{{.*}}] : tensor<4x1xi64>
// CHECK: %[[S:.*]] = arith.index_cast %[[I]] : i64 to index
// CHECK: arith.cmpi sge, %[[S]]
// CHECK: arith.cmpi sle, %[[S]]
// CHECK: scf.if
// CHECK: scf.for
// CHECK: tensor.extract
// CHECK: tensor.extract %arg2
// CHECK: arith.addf
// CHECK: tensor.insert
// CHECK-NOT: stablehlo.
// CHECK-NOT: linalg.generic
func.func @main(%operand: tensor<5x3xf32>, %indices: tensor<4x1xi64>, %updates: tensor<4x3xf32>) -> tensor<5x3xf32> {
  %0 = "stablehlo.scatter"(%operand, %indices, %updates) ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %s = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }) {scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1], inserted_window_dims = [0],
      scatter_dims_to_operand_dims = [0], index_vector_dim = 1>} : (tensor<5x3xf32>, tensor<4x1xi64>, tensor<4x3xf32>) -> tensor<5x3xf32>
  return %0 : tensor<5x3xf32>
}
