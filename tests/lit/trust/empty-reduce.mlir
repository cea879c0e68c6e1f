// RUN: kiln-opt %s --pass kiln-fold-empty-values | FileCheck %s

// A reduce over a dimension of size 0 reduces nothing: its results are its init values,
// broadcast (the spec's value; upstream's lowering left the op and the compile failed).
// CHECK-LABEL: func.func @empty_window
// CHECK-NOT: stablehlo.reduce
// CHECK: %[[R:.*]] = stablehlo.broadcast_in_dim %arg1, dims = [] : (tensor<f32>) -> tensor<3xf32>
// CHECK: return %[[R]]
func.func @empty_window(%x: tensor<0x3xf32>, %z: tensor<f32>) -> tensor<3xf32> {
  %r = stablehlo.reduce(%x init: %z) applies stablehlo.add across dimensions = [0] : (tensor<0x3xf32>, tensor<f32>) -> tensor<3xf32>
  return %r : tensor<3xf32>
}

// Elements to reduce: left alone.
// CHECK-LABEL: func.func @not_empty
// CHECK: stablehlo.reduce
func.func @not_empty(%x: tensor<2x3xf32>, %z: tensor<f32>) -> tensor<3xf32> {
  %r = stablehlo.reduce(%x init: %z) applies stablehlo.add across dimensions = [0] : (tensor<2x3xf32>, tensor<f32>) -> tensor<3xf32>
  return %r : tensor<3xf32>
}
