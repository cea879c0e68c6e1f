// RUN: kiln-opt %s --pass kiln-lower-scatter --split-input-file | FileCheck %s

// stablehlo.scatter becomes a loop over the update positions; the update computation is
// cloned as 0-d StableHLO inside it, for upstream to lower.
// CHECK-LABEL: func.func @main
// CHECK-NOT: stablehlo.scatter
// CHECK: scf.for
// CHECK: scf.if
// CHECK: stablehlo.add %{{.*}}, %{{.*}} : tensor<f32>
// CHECK: scf.yield
func.func @main(%operand: tensor<5x3xf32>, %indices: tensor<4x1xi64>, %updates: tensor<4x3xf32>) -> tensor<5x3xf32> {
  %0 = "stablehlo.scatter"(%operand, %indices, %updates) ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %s = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }) {scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1], inserted_window_dims = [0],
      scatter_dims_to_operand_dims = [0], index_vector_dim = 1>} : (tensor<5x3xf32>, tensor<4x1xi64>, tensor<4x3xf32>) -> tensor<5x3xf32>
  return %0 : tensor<5x3xf32>
}

// -----

// Without the ops this pass lowers, nothing changes.
// CHECK-LABEL: func.func @main
// CHECK-NEXT: stablehlo.negate
func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {
  %0 = stablehlo.negate %a : tensor<2xf32>
  return %0 : tensor<2xf32>
}
