// RUN: kiln-opt %s --split-input-file --pass kiln-fold-dynamic-top-k | FileCheck %s

// A constant k: a stable descending sort of (x, iota) along the last dimension, then the
// first k; the return keeps its declared type through a cast.
// CHECK-LABEL: func.func @main
// CHECK: %[[IOTA:.*]] = stablehlo.iota dim = 1 : tensor<4x3xi32>
// CHECK: %[[SORT:.*]]:2 = "stablehlo.sort"(%arg0, %[[IOTA]]) <{dimension = 1 : i64, is_stable = true}>
// CHECK: stablehlo.compare GT, {{.*}} TOTALORDER
// CHECK: %[[V:.*]] = stablehlo.slice %[[SORT]]#0 [0:4, 0:2] : (tensor<4x3xf32>) -> tensor<4x2xf32>
// CHECK: %[[I:.*]] = stablehlo.slice %[[SORT]]#1 [0:4, 0:2] : (tensor<4x3xi32>) -> tensor<4x2xi32>
// CHECK: %[[CAST:.*]] = tensor.cast %[[I]] : tensor<4x2xi32> to tensor<4x?xi32>
// CHECK: %[[NEG:.*]] = stablehlo.negate %[[V]] : (tensor<4x2xf32>) -> tensor<4x?xf32>
// CHECK: return %[[NEG]], %[[CAST]]
// CHECK-NOT: dynamic_top_k
func.func @main(%x: tensor<4x3xf32>) -> (tensor<4x?xf32>, tensor<4x?xi32>) {
  %k = stablehlo.constant dense<2> : tensor<i32>
  %v, %i = stablehlo.custom_call @stablehlo.dynamic_top_k(%x, %k) {api_version = 2 : i32} : (tensor<4x3xf32>, tensor<i32>) -> (tensor<4x?xf32>, tensor<4x?xi32>)
  %n = stablehlo.negate %v : tensor<4x?xf32>
  return %n, %i : tensor<4x?xf32>, tensor<4x?xi32>
}

// -----

// k is not a constant: left as it is (the driver reports results that stay dynamic).
// CHECK-LABEL: func.func @unknown_k
// CHECK: stablehlo.custom_call @stablehlo.dynamic_top_k
func.func @unknown_k(%x: tensor<4x3xf32>, %k: tensor<i32>) -> (tensor<4x?xf32>, tensor<4x?xi32>) {
  %v, %i = stablehlo.custom_call @stablehlo.dynamic_top_k(%x, %k) {api_version = 2 : i32} : (tensor<4x3xf32>, tensor<i32>) -> (tensor<4x?xf32>, tensor<4x?xi32>)
  return %v, %i : tensor<4x?xf32>, tensor<4x?xi32>
}
