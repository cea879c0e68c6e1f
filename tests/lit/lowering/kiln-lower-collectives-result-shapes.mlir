// RUN: not kiln-opt %s --pass kiln-lower-collectives --split-input-file 2>&1 | FileCheck %s

// Fuzz finding F6: with no replica groups written (every replica) the StableHLO verifier
// cannot check a collective's result shape; kiln-lower-collectives checks it against the
// groups it resolved, as a located error.

// CHECK: kiln-lower-collectives-result-shapes.mlir:10:10: stablehlo.all_gather: the result is declared tensor<4xf32>, but groups {{\[\[0, 1, 2, 3\]\]}} give 8 (operand dimension 0 x group size 4)
module attributes {mhlo.num_replicas = 4 : i32} {
  func.func @main(%x: tensor<2xf32>) -> tensor<4xf32> {
    %g = "stablehlo.all_gather"(%x) {all_gather_dim = 0 : i64, replica_groups = dense<> : tensor<0x0xi64>} : (tensor<2xf32>) -> tensor<4xf32>
    return %g : tensor<4xf32>
  }
}

// -----

// CHECK: kiln-lower-collectives-result-shapes.mlir:20:10: stablehlo.reduce_scatter: operand dimension 0 of size 6 does not split into 4 equal parts
module attributes {mhlo.num_replicas = 4 : i32} {
  func.func @main(%x: tensor<6xf32>) -> tensor<2xf32> {
    %r = "stablehlo.reduce_scatter"(%x) ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %s = stablehlo.add %a, %b : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) {scatter_dimension = 0 : i64, replica_groups = dense<> : tensor<0x0xi64>} : (tensor<6xf32>) -> tensor<2xf32>
    return %r : tensor<2xf32>
  }
}
