// RUN: kiln-opt %s --pass kiln-dedupe-results --split-input-file | FileCheck %s

// A value returned twice is returned once; kiln.result_sources tells the runtime which
// compiled result each program result copies.
// CHECK-LABEL: func.func @main
// CHECK-SAME: -> (tensor<2xf32>, tensor<2xf32>)
// CHECK-SAME: kiln.result_sources = array<i64: 0, 1, 0>
// CHECK: return %{{.*}}, %{{.*}} : tensor<2xf32>, tensor<2xf32>
func.func @main(%a: tensor<2xf32>) -> (tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) {
  %0 = stablehlo.negate %a : tensor<2xf32>
  return %0, %a, %0 : tensor<2xf32>, tensor<2xf32>, tensor<2xf32>
}

// -----

// Distinct results stay as they are.
// CHECK-LABEL: func.func @main
// CHECK-NOT: kiln.result_sources
// CHECK: return %{{.*}}, %{{.*}} : tensor<2xf32>, tensor<2xf32>
func.func @main(%a: tensor<2xf32>) -> (tensor<2xf32>, tensor<2xf32>) {
  %0 = stablehlo.negate %a : tensor<2xf32>
  return %0, %a : tensor<2xf32>, tensor<2xf32>
}
