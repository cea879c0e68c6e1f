// RUN: not kiln-opt %s --target gpu --stage legalize --split-input-file 2>&1 | FileCheck %s
// RUN: not kiln-opt %s --pass kiln-gpu-check-supported --split-input-file 2>&1 | FileCheck %s

// Before the GPU target legalizes anything, a custom call with no GPU target (which would
// become a call of the C runtime's dispatcher) is named with its target and location
// (collectives and host transfers run host-staged: host_transfers.mlir).
// CHECK: check_supported.mlir:9:8: custom call 'my_library_op' is not supported by the GPU target yet
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = stablehlo.custom_call @my_library_op(%x) {api_version = 2 : i32} : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

