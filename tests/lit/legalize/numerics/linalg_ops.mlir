// RUN: kiln-opt %s --stage legalize --split-input-file | FileCheck %s

// triangular_solve is forward substitution: a loop over the 4 rows of the solution, each a
// batched row-times-matrix product and a division by the diagonal, written into the loop-carried
// solution in place.
// CHECK-LABEL: func.func @solve
// CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[X:.*]] = %{{.*}}) -> (tensor<2x4x3xf32>)
// CHECK: linalg.batch_matmul
// CHECK: arith.divf
// CHECK: tensor.insert_slice %{{.*}} into %[[X]]
// CHECK: scf.yield
// CHECK-NOT: stablehlo.
func.func @solve(%a: tensor<2x4x4xf32>, %b: tensor<2x4x3xf32>) -> tensor<2x4x3xf32> {
  %0 = "stablehlo.triangular_solve"(%a, %b) {left_side = true, lower = true, unit_diagonal = false, transpose_a = #stablehlo<transpose NO_TRANSPOSE>} : (tensor<2x4x4xf32>, tensor<2x4x3xf32>) -> tensor<2x4x3xf32>
  return %0 : tensor<2x4x3xf32>
}

// -----

// cholesky is XLA's column loop; the loop also carries the per-matrix "saw a NaN pivot" flag
// that turns a non-positive-definite matrix into all NaN at the end.
// CHECK-LABEL: func.func @chol
// CHECK: arith.constant dense<0x7FF8000000000000> : tensor<f64>
// CHECK: scf.for {{.*}} -> (tensor<3x3xf64>, tensor<1x1xi1>)
// CHECK: math.sqrt
// CHECK: arith.ori
// CHECK: scf.yield
// CHECK-NOT: stablehlo.
func.func @chol(%a: tensor<3x3xf64>) -> tensor<3x3xf64> {
  %0 = "stablehlo.cholesky"(%a) {lower = true} : (tensor<3x3xf64>) -> tensor<3x3xf64>
  return %0 : tensor<3x3xf64>
}
