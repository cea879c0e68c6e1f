// RUN: kiln-opt %s --stage lower | FileCheck %s

// lower leaves only the LLVM dialect, with the C-interface wrapper the runtime calls.
// CHECK: llvm.func internal @main
// CHECK: llvm.func @_mlir_ciface_main
// CHECK-NOT: {{ (memref|scf|arith|linalg|func)\.}}
func.func @main(%a: tensor<3xf64>) -> tensor<3xf64> {
  %0 = stablehlo.exponential %a : tensor<3xf64>
  return %0 : tensor<3xf64>
}
