// RUN: kiln-opt %s --pass kiln-copy-repeated-results --split-input-file | FileCheck %s

// A value the entry returns twice is returned once as is and once as a copy, so each
// result can become its own out-parameter.
// CHECK-LABEL: func.func @main
// CHECK: %[[V:.*]] = arith.negf
// CHECK: %[[COPY:.*]] = linalg.copy {{.*}}ins(%[[V]] : tensor<2xf32>)
// CHECK: return %[[V]], %[[COPY]]
func.func @main(%a: tensor<2xf32>) -> (tensor<2xf32>, tensor<2xf32>) {
  %0 = arith.negf %a : tensor<2xf32>
  return %0, %0 : tensor<2xf32>, tensor<2xf32>
}

// -----

// Distinct results need no copy.
// CHECK-LABEL: func.func @main
// CHECK-NOT: linalg.copy
// CHECK: return
func.func @main(%a: tensor<2xf32>) -> (tensor<2xf32>, tensor<2xf32>) {
  %0 = arith.negf %a : tensor<2xf32>
  return %0, %a : tensor<2xf32>, tensor<2xf32>
}
