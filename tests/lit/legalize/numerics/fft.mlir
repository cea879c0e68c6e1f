// RUN: kiln-opt %s --stage legalize | FileCheck %s

// A length-8 FFT is one real matrix product [re | im] @ [[Wr, Wi], [-Wi, Wr]]: the complex
// operand is split into parts stacked on a new axis, multiplied by a 16x16 twiddle block, and
// recombined. No stablehlo.fft (nor any other StableHLO op) is left for upstream to reject.
// CHECK-LABEL: func.func @main
// CHECK: arith.constant dense<"0x{{[0-9A-F]+}}"> : tensor<16x16xf32>
// CHECK: complex.re
// CHECK: complex.im
// CHECK: linalg.matmul {{.*}} -> tensor<3x16xf32>
// CHECK: complex.create
// CHECK-NOT: stablehlo.
func.func @main(%x: tensor<3x8xcomplex<f32>>) -> tensor<3x8xcomplex<f32>> {
  %0 = stablehlo.fft %x, type = FFT, length = [8] : (tensor<3x8xcomplex<f32>>) -> tensor<3x8xcomplex<f32>>
  return %0 : tensor<3x8xcomplex<f32>>
}
