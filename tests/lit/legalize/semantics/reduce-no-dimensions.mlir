// RUN: kiln-opt %s --pass kiln-fix-semantics --split-input-file | FileCheck %s
// RUN: kiln-opt %s --stage legalize --split-input-file | FileCheck %s --check-prefix=LINALG

// A reduce over no dimensions (JAX: reduce_max(x, ()) under disable_jit) runs over a new
// trailing dimension of size 1, which upstream lowers; variadic reduces gain it on every input.
// CHECK-LABEL: func.func @main
// CHECK: %[[WIDE:.*]] = stablehlo.broadcast_in_dim %arg0, dims = [0, 1] : (tensor<2x3xf32>) -> tensor<2x3x1xf32>
// CHECK: stablehlo.reduce(%[[WIDE]] init: %{{.*}}) applies stablehlo.maximum across dimensions = [2] : (tensor<2x3x1xf32>, tensor<f32>) -> tensor<2x3xf32>
// LINALG-LABEL: func.func @main
// LINALG-NOT: stablehlo.
// LINALG: linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "reduction"]
func.func @main(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %init = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %0 = stablehlo.reduce(%x init: %init) applies stablehlo.maximum across dimensions = [] : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// CHECK-LABEL: func.func @main
// CHECK: %[[A:.*]] = stablehlo.broadcast_in_dim %arg0, dims = [] : (tensor<f32>) -> tensor<1xf32>
// CHECK: %[[B:.*]] = stablehlo.broadcast_in_dim %arg1, dims = [] : (tensor<i32>) -> tensor<1xi32>
// CHECK: stablehlo.reduce(%[[A]] init: %{{.*}}), (%[[B]] init: %{{.*}}) across dimensions = [0]
// LINALG-LABEL: func.func @main
// LINALG-NOT: stablehlo.
// LINALG: linalg.generic {{.*}}iterator_types = ["reduction"]
func.func @main(%x: tensor<f32>, %i: tensor<i32>) -> (tensor<f32>, tensor<i32>) {
  %f0 = stablehlo.constant dense<0.0> : tensor<f32>
  %i0 = stablehlo.constant dense<1> : tensor<i32>
  %0:2 = stablehlo.reduce(%x init: %f0), (%i init: %i0) across dimensions = [] : (tensor<f32>, tensor<i32>, tensor<f32>, tensor<i32>) -> (tensor<f32>, tensor<i32>)
    reducer(%a: tensor<f32>, %b: tensor<f32>) (%c: tensor<i32>, %d: tensor<i32>) {
      %s = stablehlo.add %a, %b : tensor<f32>
      %p = stablehlo.multiply %c, %d : tensor<i32>
      stablehlo.return %s, %p : tensor<f32>, tensor<i32>
    }
  return %0#0, %0#1 : tensor<f32>, tensor<i32>
}

