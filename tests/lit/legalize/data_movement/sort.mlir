// RUN: kiln-opt %s --stage legalize | FileCheck %s

// Sort is a bottom-up merge sort: ceil(log2 7) = 3 passes, each a loop over the rows, the
// runs, and the merged positions; the comparator is evaluated as (right, left) so ties keep
// the left element (stable). Both operands move with the keys.
// CHECK-LABEL: func.func @main
// CHECK-COUNT-3: scf.for {{.*}} -> (tensor<2x7xf32>, tensor<2x7xi32>)
// CHECK: scf.for {{.*}} -> (index, index, tensor<2x7xf32>, tensor<2x7xi32>)
// CHECK: arith.cmpf ogt
// CHECK: arith.select
// CHECK-NOT: stablehlo.
func.func @main(%keys: tensor<2x7xf32>, %vals: tensor<2x7xi32>) -> (tensor<2x7xf32>, tensor<2x7xi32>) {
  %0:2 = "stablehlo.sort"(%keys, %vals) ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>, %c: tensor<i32>, %d: tensor<i32>):
    %gt = stablehlo.compare GT, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %gt : tensor<i1>
  }) {dimension = 1 : i64, is_stable = true} : (tensor<2x7xf32>, tensor<2x7xi32>) -> (tensor<2x7xf32>, tensor<2x7xi32>)
  return %0#0, %0#1 : tensor<2x7xf32>, tensor<2x7xi32>
}
