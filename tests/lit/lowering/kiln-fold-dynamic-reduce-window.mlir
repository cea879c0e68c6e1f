// RUN: kiln-opt %s --split-input-file --pass kiln-fold-dynamic-reduce-window | FileCheck %s

// Constant window operands: a stablehlo.reduce_window of static shape whose body calls the
// reducer; the return keeps its declared type through a cast.
// CHECK-LABEL: func.func @main
// CHECK: %[[R:.*]] = "stablehlo.reduce_window"(%arg0, %{{.*}}) <{base_dilations = array<i64: 1, 1>, padding = dense<{{\[\[}}2, 0], [0, 0]]> : tensor<2x2xi64>, window_dilations = array<i64: 1, 1>, window_dimensions = array<i64: 3, 1>, window_strides = array<i64: 1, 1>}>
// CHECK: func.call @sum
// CHECK: stablehlo.return
// CHECK: -> tensor<3x4xf32>
// CHECK: tensor.cast %[[R]] : tensor<3x4xf32> to tensor<?x4xf32>
// CHECK-NOT: dynamic_reduce_window
func.func @main(%x: tensor<3x4xf32>) -> tensor<?x4xf32> {
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %d = stablehlo.constant dense<[3, 1]> : tensor<2xi32>
  %s = stablehlo.constant dense<[1, 1]> : tensor<2xi32>
  %p = stablehlo.constant dense<[[2, 0], [0, 0]]> : tensor<2x2xi32>
  %r = stablehlo.custom_call @stablehlo.dynamic_reduce_window(%x, %z, %d, %s, %s, %s, %p) {api_version = 2 : i32, called_computations = [@sum]} : (tensor<3x4xf32>, tensor<f32>, tensor<2xi32>, tensor<2xi32>, tensor<2xi32>, tensor<2xi32>, tensor<2x2xi32>) -> tensor<?x4xf32>
  return %r : tensor<?x4xf32>
}
func.func private @sum(%a: tensor<f32>, %b: tensor<f32>) -> tensor<f32> {
  %0 = stablehlo.add %a, %b : tensor<f32>
  return %0 : tensor<f32>
}
