// RUN: kiln-opt %s --pass kiln-lower-rng-normal --split-input-file | FileCheck %s

// A float NORMAL rng becomes StableHLO: a hashed counter (iota, shifts, multiplies) and
// Box-Muller's log, sqrt and cosine.
// CHECK-LABEL: func.func @main
// CHECK-NOT: stablehlo.rng
// CHECK: stablehlo.iota
// CHECK: stablehlo.shift_right_logical
// CHECK: stablehlo.log
// CHECK: stablehlo.sqrt
// CHECK: stablehlo.cosine
func.func @main(%mu: tensor<f32>, %sigma: tensor<f32>) -> tensor<4xf32> {
  %shape = stablehlo.constant dense<[4]> : tensor<1xi64>
  %0 = stablehlo.rng %mu, %sigma, %shape, distribution = NORMAL : (tensor<f32>, tensor<f32>, tensor<1xi64>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Integer UNIFORM: a + (64 hashed bits mod (b - a)), no overflow (upstream rejects it).
// CHECK-LABEL: func.func @main
// CHECK-NOT: stablehlo.rng
// CHECK: stablehlo.iota
// CHECK: stablehlo.select
// CHECK: stablehlo.remainder
func.func @main(%a: tensor<i32>, %b: tensor<i32>) -> tensor<4xi32> {
  %shape = stablehlo.constant dense<[4]> : tensor<1xi64>
  %0 = stablehlo.rng %a, %b, %shape, distribution = UNIFORM : (tensor<i32>, tensor<i32>, tensor<1xi64>) -> tensor<4xi32>
  return %0 : tensor<4xi32>
}
