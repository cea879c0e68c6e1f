// RUN: not kiln-opt %s --target gpu --stage legalize --split-input-file 2>&1 | FileCheck %s
// RUN: not kiln-opt %s --pass kiln-gpu-check-supported --split-input-file 2>&1 | FileCheck %s

// Before the GPU target legalizes anything, a custom call (which would become a call of
// the C runtime's dispatcher) is named with its target and location; so is a collective
// (which would become a call of Kiln's collective runtime).
// CHECK: check_supported.mlir:9:8: custom call 'my_library_op' is not supported by the GPU target yet
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = stablehlo.custom_call @my_library_op(%x) {api_version = 2 : i32} : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// CHECK: check_supported.mlir:18:8: 'stablehlo.all_gather' (collective) is not supported by the GPU target yet
module @m attributes {mhlo.num_replicas = 2 : i32} {
func.func @main(%x: tensor<4xf32>) -> tensor<8xf32> {
  %y = "stablehlo.all_gather"(%x) {all_gather_dim = 0 : i64, replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<4xf32>) -> tensor<8xf32>
  return %y : tensor<8xf32>
}
}
