// RUN: not kiln-opt %s --pass kiln-check-buffer-sizes 2>&1 | FileCheck %s

// A signature counts too (a dimension of 2^63 - 1).
// CHECK: buffer-sizes-signature.mlir:[[# @LINE + 1]]:1: block argument 0 of 'func.func' has type tensor<9223372036854775807xi8>: 9223372036854775807 bytes, more than the
func.func @main(%x: tensor<9223372036854775807xi8>) -> tensor<9223372036854775807xi8> {
  return %x : tensor<9223372036854775807xi8>
}
