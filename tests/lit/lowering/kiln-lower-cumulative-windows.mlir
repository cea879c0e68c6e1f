// RUN: kiln-opt %s --pass kiln-lower-cumulative-windows --split-input-file | FileCheck %s

// jnp.cumsum: a window spanning the whole dimension, padded n-1 in front, becomes one loop
// that carries the running sum and writes one slice a step.
// CHECK-LABEL: func.func @main
// CHECK-NOT: stablehlo.reduce_window
// CHECK: scf.for
// CHECK: stablehlo.dynamic_slice
// CHECK: stablehlo.add
// CHECK: stablehlo.dynamic_update_slice
// CHECK: scf.yield
// CHECK: } {kiln.scalarize}
func.func @main(%a: tensor<8xf32>) -> tensor<8xf32> {
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %0 = "stablehlo.reduce_window"(%a, %z) ({
  ^bb0(%x: tensor<f32>, %y: tensor<f32>):
    %s = stablehlo.add %x, %y : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }) {window_dimensions = array<i64: 8>, padding = dense<[[7, 0]]> : tensor<1x2xi64>} : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

// A reverse cummax along rows: the scan walks the dimension from its end, a row at a time.
// CHECK-LABEL: func.func @main
// CHECK-NOT: stablehlo.reduce_window
// CHECK: scf.for
// CHECK: stablehlo.subtract
// CHECK: stablehlo.maximum {{.*}} : tensor<3xf32>
func.func @main(%a: tensor<3x5xf32>) -> tensor<3x5xf32> {
  %z = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %0 = "stablehlo.reduce_window"(%a, %z) ({
  ^bb0(%x: tensor<f32>, %y: tensor<f32>):
    %s = stablehlo.maximum %x, %y : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }) {window_dimensions = array<i64: 1, 5>, padding = dense<[[0, 0], [0, 4]]> : tensor<2x2xi64>} : (tensor<3x5xf32>, tensor<f32>) -> tensor<3x5xf32>
  return %0 : tensor<3x5xf32>
}

// -----

// A sliding window (max pooling) is not a scan: left to the window lowering.
// CHECK-LABEL: func.func @main
// CHECK: stablehlo.reduce_window
// CHECK-NOT: scf.for
func.func @main(%a: tensor<8xf32>) -> tensor<7xf32> {
  %z = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %0 = "stablehlo.reduce_window"(%a, %z) ({
  ^bb0(%x: tensor<f32>, %y: tensor<f32>):
    %s = stablehlo.maximum %x, %y : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }) {window_dimensions = array<i64: 2>} : (tensor<8xf32>, tensor<f32>) -> tensor<7xf32>
  return %0 : tensor<7xf32>
}
