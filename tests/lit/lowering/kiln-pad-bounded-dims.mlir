// RUN: kiln-opt %s --pass kiln-pad-bounded-dims --split-input-file | FileCheck %s

// set_dimension_size with a size known only at run time: the value stays at its bound, the
// reduce masks the padding with its init value, get_dimension_size reads the (clamped) size
// and the result comes back at its bound with zeros past the size.
// CHECK-LABEL: func.func @main
// CHECK-SAME: -> (tensor<8x3xf32>, tensor<i32>, tensor<3xf32>)
// CHECK: %[[N:.*]] = stablehlo.clamp
// CHECK: %[[Y:.*]] = stablehlo.reshape %arg0 : (tensor<8x3xf32>) -> tensor<8x3xf32>
// CHECK: %[[E:.*]] = stablehlo.exponential %[[Y]] : tensor<8x3xf32>
// CHECK: stablehlo.iota dim = 0 : tensor<8x3xi32>
// CHECK: stablehlo.compare LT
// CHECK: %[[MASKED:.*]] = stablehlo.select
// CHECK: stablehlo.reduce(%[[MASKED]] init:
// CHECK-NOT: get_dimension_size
// CHECK: return
func.func @main(%x: tensor<8x3xf32>, %n: tensor<i32>) -> (tensor<?x3xf32, #stablehlo.bounds<8, ?>>, tensor<i32>, tensor<3xf32>) {
  %y = stablehlo.set_dimension_size %x, %n, dim = 0 : (tensor<8x3xf32>, tensor<i32>) -> tensor<?x3xf32, #stablehlo.bounds<8, ?>>
  %e = stablehlo.exponential %y : tensor<?x3xf32, #stablehlo.bounds<8, ?>>
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %s = stablehlo.reduce(%e init: %z) applies stablehlo.add across dimensions = [0] : (tensor<?x3xf32, #stablehlo.bounds<8, ?>>, tensor<f32>) -> tensor<3xf32>
  %m = stablehlo.get_dimension_size %e, dim = 0 : (tensor<?x3xf32, #stablehlo.bounds<8, ?>>) -> tensor<i32>
  return %e, %m, %s : tensor<?x3xf32, #stablehlo.bounds<8, ?>>, tensor<i32>, tensor<3xf32>
}

// -----

// A constant size: the result is sliced to its exact shape.
// CHECK-LABEL: func.func @main
// CHECK-SAME: -> tensor<3x4xf32>
// CHECK: stablehlo.slice %{{.*}} [0:3, 0:4]
func.func @main(%x: tensor<6x4xf32>) -> tensor<?x4xf32, #stablehlo.bounds<6, ?>> {
  %c = stablehlo.constant dense<3> : tensor<i32>
  %y = stablehlo.set_dimension_size %x, %c, dim = 0 : (tensor<6x4xf32>, tensor<i32>) -> tensor<?x4xf32, #stablehlo.bounds<6, ?>>
  %t = stablehlo.tanh %y : tensor<?x4xf32, #stablehlo.bounds<6, ?>>
  return %t : tensor<?x4xf32, #stablehlo.bounds<6, ?>>
}
