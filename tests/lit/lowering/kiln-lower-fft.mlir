// RUN: kiln-opt %s --pass kiln-lower-fft --split-input-file | FileCheck %s

// A short complex FFT is one product with the DFT matrix, on (real, imaginary) parts: cheaper
// than a library call.
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

// A long transform is a call of the built-in library target kiln.fft, its kind and lengths in
// the typed-FFI attributes.
// CHECK-LABEL: func.func @main
// CHECK-NOT: stablehlo.fft
// CHECK: stablehlo.custom_call @kiln.fft(%arg0) {api_version = 4 : i32, mhlo.backend_config = {fft_length = array<i64: 6, 1000>, fft_type = "IRFFT"}} : (tensor<2x6x501xcomplex<f64>>) -> tensor<2x6x1000xf64>
// CHECK-NOT: dot_general
func.func @main(%x: tensor<2x6x501xcomplex<f64>>) -> tensor<2x6x1000xf64> {
  %0 = stablehlo.fft %x, type = IRFFT, length = [6, 1000] : (tensor<2x6x501xcomplex<f64>>) -> tensor<2x6x1000xf64>
  return %0 : tensor<2x6x1000xf64>
}

// -----

// Without the ops this pass lowers, nothing changes.
// CHECK-LABEL: func.func @main
// CHECK-NEXT: stablehlo.negate
func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {
  %0 = stablehlo.negate %a : tensor<2xf32>
  return %0 : tensor<2xf32>
}
