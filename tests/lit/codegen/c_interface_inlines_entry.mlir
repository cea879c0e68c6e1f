// RUN: kiln-opt %s --stage lower | FileCheck %s

// The entry becomes internal and always-inline, so LLVM folds it into its C-interface wrapper:
// no call passing every memref descriptor field (1,937 operands for ResNet50 with its weights
// as arguments) reaches instruction selection. The wrapper stays external: the runtime calls it.
// CHECK: llvm.func internal @main(
// CHECK-SAME: always_inline
// CHECK: llvm.func @_mlir_ciface_main(
// CHECK-NOT: always_inline
// CHECK: llvm.call @main(
func.func @main(%a: tensor<4xf32>, %b: tensor<4xf32>, %c: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.add %a, %b : tensor<4xf32>
  %1 = stablehlo.multiply %0, %c : tensor<4xf32>
  return %1 : tensor<4xf32>
}
