// RUN: not kiln-opt %s --stage verify 2>&1 | FileCheck %s

// Invalid IR is a one-line error naming the file, line, column and the op's complaint.
// CHECK: kiln-opt: error: {{.*}}verify-invalid.mlir:8:8: cannot parse MLIR: 'stablehlo.transpose': attribute permutation must be a permutation
// CHECK-NOT: Traceback
func.func @main(%a: tensor<2x3xf32>) -> tensor<3x2xf32> {
  %0 = stablehlo.add %a, %a : tensor<2x3xf32>
  %1 = stablehlo.transpose %0, dims = [0, 0] : (tensor<2x3xf32>) -> tensor<3x2xf32>
  return %1 : tensor<3x2xf32>
}
