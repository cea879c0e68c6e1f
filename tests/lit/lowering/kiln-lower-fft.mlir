// RUN: kiln-opt %s --pass kiln-lower-fft --split-input-file | FileCheck %s

// A short complex FFT is one product with the DFT matrix, on (real, imaginary) parts.
// CHECK-LABEL: func.func @main
// CHECK-NOT: stablehlo.fft
// CHECK: stablehlo.real
// CHECK: stablehlo.imag
// CHECK: stablehlo.dot_general
// CHECK: stablehlo.complex
func.func @main(%x: tensor<3x8xcomplex<f32>>) -> tensor<3x8xcomplex<f32>> {
  %0 = stablehlo.fft %x, type = FFT, length = [8] : (tensor<3x8xcomplex<f32>>) -> tensor<3x8xcomplex<f32>>
  return %0 : tensor<3x8xcomplex<f32>>
}

// -----

// Without the ops this pass lowers, nothing changes.
// CHECK-LABEL: func.func @main
// CHECK-NEXT: stablehlo.negate
func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {
  %0 = stablehlo.negate %a : tensor<2xf32>
  return %0 : tensor<2xf32>
}
