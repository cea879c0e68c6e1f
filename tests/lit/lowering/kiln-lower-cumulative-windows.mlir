// RUN: kiln-opt %s --pass kiln-lower-cumulative-windows --split-input-file | FileCheck %s

// jnp.cumsum: a window spanning the whole dimension, padded n-1 in front, becomes one loop
// that carries the running sum as a scalar and writes one element a step.
// CHECK-LABEL: func.func @main
// CHECK-NOT: stablehlo.reduce_window
// CHECK: %[[INIT:[a-z0-9_]+]] = tensor.extract %{{.*}}[] : tensor<f32>
// CHECK: scf.for %[[I:[a-z0-9_]+]] = {{.*}} iter_args(%[[ACC:[a-z0-9_]+]] = %[[INIT]], %[[OUT:[a-z0-9_]+]] = %{{.*}}) -> (f32, tensor<8xf32>)
// CHECK: %[[X:[a-z0-9_]+]] = tensor.extract %arg0[%[[I]]]
// CHECK: tensor.from_elements %[[ACC]]
// CHECK: stablehlo.add
// CHECK: %[[SUM:[a-z0-9_]+]] = tensor.extract
// CHECK: %[[NEW:[a-z0-9_]+]] = tensor.insert %[[SUM]] into %[[OUT]][%[[I]]]
// CHECK: scf.yield %[[SUM]], %[[NEW]]
// CHECK: } {kiln.scalarize}
// CHECK-NOT: reshape
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

// A reverse cummax along rows: one loop over the 3 independent rows, each scanned from its
// end with the running maximum in a register.
// CHECK-LABEL: func.func @main
// CHECK-NOT: stablehlo.reduce_window
// CHECK: %[[C4:[a-z0-9_]+]] = arith.constant 4 : index
// CHECK: scf.for %[[ROW:[a-z0-9_]+]] = {{.*}} -> (tensor<3x5xf32>)
// CHECK: scf.for %[[S:[a-z0-9_]+]] = {{.*}} -> (f32, tensor<3x5xf32>)
// CHECK: %[[AT:[a-z0-9_]+]] = arith.subi %[[C4]], %[[S]]
// CHECK: tensor.extract %arg0[%[[ROW]], %[[AT]]]
// CHECK: stablehlo.maximum {{.*}} : tensor<f32>
// CHECK: tensor.insert {{.*}}[%[[ROW]], %[[AT]]]
// CHECK: } {kiln.scalarize}
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

// Along the middle axis of 2x3x6x4 (rows of 24 elements, after the scanned one): the first
// step combines init with row 0; each later step combines the previous output row with the
// next input row in an innermost loop over the row's elements, which LLVM vectorizes. The
// dimensions around the scanned one are seen as one each (reshapes, no copies).
// CHECK-LABEL: func.func @main
// CHECK: %[[XV:[a-z0-9_]+]] = tensor.collapse_shape %arg0 {{\[\[}}0], [1], [2, 3]] : tensor<2x3x6x4xf32> into tensor<2x3x24xf32>
// CHECK: scf.for %[[O:[a-z0-9_]+]] = {{.*}} -> (tensor<2x3x24xf32>)
// CHECK: scf.for %[[K:[a-z0-9_]+]] = {{.*}} -> (tensor<2x3x24xf32>)
// CHECK: tensor.extract %[[XV]][%[[O]], %c0, %[[K]]]
// CHECK: scf.for %[[S:[a-z0-9_]+]] = %c1 to %c3
// CHECK: %[[PREV:[a-z0-9_]+]] = arith.subi %[[S]], %c1
// CHECK: scf.for %[[K2:[a-z0-9_]+]] = {{.*}} iter_args(%[[OUT:[a-z0-9_]+]] = {{.*}})
// CHECK: tensor.extract %[[OUT]][%[[O]], %[[PREV]], %[[K2]]]
// CHECK: tensor.extract %[[XV]][%[[O]], %[[S]], %[[K2]]]
// CHECK: stablehlo.multiply
// CHECK: tensor.insert {{.*}} into %[[OUT]][%[[O]], %[[S]], %[[K2]]]
// CHECK: } {kiln.scalarize}
// CHECK: tensor.expand_shape {{.*}} into tensor<2x3x6x4xf32>
func.func @main(%a: tensor<2x3x6x4xf32>) -> tensor<2x3x6x4xf32> {
  %one = stablehlo.constant dense<1.0> : tensor<f32>
  %0 = "stablehlo.reduce_window"(%a, %one) ({
  ^bb0(%x: tensor<f32>, %y: tensor<f32>):
    %s = stablehlo.multiply %x, %y : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }) {window_dimensions = array<i64: 1, 3, 1, 1>, padding = dense<[[0, 0], [2, 0], [0, 0], [0, 0]]> : tensor<4x2xi64>} : (tensor<2x3x6x4xf32>, tensor<f32>) -> tensor<2x3x6x4xf32>
  return %0 : tensor<2x3x6x4xf32>
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
