// RUN: kiln-opt %s --pass kiln-widen-narrow-floats --split-input-file | FileCheck %s

// Arithmetic on an 8-bit float is done in f32 and rounded back.
// CHECK-LABEL: func.func @main
// CHECK: stablehlo.convert %{{.*}} : (tensor<4xf8E4M3FN>) -> tensor<4xf32>
// CHECK: stablehlo.convert %{{.*}} : (tensor<4xf8E4M3FN>) -> tensor<4xf32>
// CHECK: stablehlo.add %{{.*}}, %{{.*}} : tensor<4xf32>
// CHECK: stablehlo.convert %{{.*}} : (tensor<4xf32>) -> tensor<4xf8E4M3FN>
func.func @main(%a: tensor<4xf8E4M3FN>, %b: tensor<4xf8E4M3FN>) -> tensor<4xf8E4M3FN> {
  %0 = stablehlo.add %a, %b : tensor<4xf8E4M3FN>
  return %0 : tensor<4xf8E4M3FN>
}

// -----

// Without the ops this pass lowers, nothing changes.
// CHECK-LABEL: func.func @main
// CHECK-NEXT: stablehlo.negate
func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {
  %0 = stablehlo.negate %a : tensor<2xf32>
  return %0 : tensor<2xf32>
}
