// RUN: not kiln-opt %s --pass kiln-pad-bounded-dims --split-input-file 2>&1 | FileCheck %s

// An op whose result would depend on the padding, with no rule here yet: a located error.
// CHECK: kiln-pad-bounded-dims-errors.mlir:{{[0-9]+}}:{{[0-9]+}}: stablehlo.sort: this op on a bounded dynamic dimension
func.func @main(%x: tensor<6xf32>, %n: tensor<i32>) -> tensor<?xf32, #stablehlo.bounds<6>> {
  %y = stablehlo.set_dimension_size %x, %n, dim = 0 : (tensor<6xf32>, tensor<i32>) -> tensor<?xf32, #stablehlo.bounds<6>>
  %s = "stablehlo.sort"(%y) ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %lt = stablehlo.compare LT, %a, %b : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %lt : tensor<i1>
  }) {dimension = 0 : i64, is_stable = true} : (tensor<?xf32, #stablehlo.bounds<6>>) -> tensor<?xf32, #stablehlo.bounds<6>>
  return %s : tensor<?xf32, #stablehlo.bounds<6>>
}

// -----

// A region reading a padded value from above would read its padding as data.
// CHECK: kiln-pad-bounded-dims-errors.mlir:{{[0-9]+}}:{{[0-9]+}}: stablehlo.case: a region that uses a value of bounded dynamic size
func.func @main(%x: tensor<6xf32>, %n: tensor<i32>, %i: tensor<i32>) -> tensor<f32> {
  %y = stablehlo.set_dimension_size %x, %n, dim = 0 : (tensor<6xf32>, tensor<i32>) -> tensor<?xf32, #stablehlo.bounds<6>>
  %r = "stablehlo.case"(%i) ({
    %z = stablehlo.constant dense<0.0> : tensor<f32>
    %s = stablehlo.reduce(%y init: %z) applies stablehlo.add across dimensions = [0] : (tensor<?xf32, #stablehlo.bounds<6>>, tensor<f32>) -> tensor<f32>
    stablehlo.return %s : tensor<f32>
  }, {
    %z = stablehlo.constant dense<1.0> : tensor<f32>
    stablehlo.return %z : tensor<f32>
  }) : (tensor<i32>) -> tensor<f32>
  return %r : tensor<f32>
}
