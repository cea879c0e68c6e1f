// RUN: not kiln-opt %s --pass kiln-check-buffer-sizes 2>&1 | FileCheck %s

// A shape whose byte size does not fit in 64 bits is refused where it is made (its 4-byte
// elements times 2^62 wrapped to 0 in the lowered code's arithmetic).
func.func @main() -> tensor<f32> {
  // CHECK: buffer-sizes.mlir:[[# @LINE + 1]]:8: result 0 of 'stablehlo.iota' has type tensor<2147483648x2147483648xf32>: 18446744073709551616 bytes, more than a 64-bit size can hold
  %r = stablehlo.iota dim = 0 : tensor<2147483648x2147483648xf32>
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %s = stablehlo.reduce(%r init: %z) applies stablehlo.add across dimensions = [0, 1] : (tensor<2147483648x2147483648xf32>, tensor<f32>) -> tensor<f32>
  return %s : tensor<f32>
}
