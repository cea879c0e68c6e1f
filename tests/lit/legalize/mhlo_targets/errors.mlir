// RUN: not kiln-opt %s --pass kiln-lower-jax-custom-calls 2>&1 | FileCheck %s

// CHECK: errors.mlir:5:10: custom call 'mhlo.topk' with largest = false (MHLO's top-k selects the largest elements; negate the operand to select the smallest)
func.func @main(%x: tensor<8xf32>) -> tensor<2xf32> {
  %0:2 = stablehlo.custom_call @mhlo.topk(%x) {mhlo.attributes = {k = 2 : i64, largest = false}, mhlo.version = 1 : i64} : (tensor<8xf32>) -> (tensor<2xf32>, tensor<2xi32>)
  return %0#0 : tensor<2xf32>
}
