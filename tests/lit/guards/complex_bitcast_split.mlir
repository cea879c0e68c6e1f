// RUN: kiln-opt %s --stage verify | FileCheck %s

// complex<f64> -> 2 x complex<f32> is rebuilt from the parts' bits: element 0 holds the low
// and high halves of the real part, element 1 those of the imaginary part (little-endian).
// CHECK-LABEL: func.func @main
// CHECK-NOT: stablehlo.bitcast_convert %arg0
// CHECK: stablehlo.real %arg0
// CHECK: stablehlo.bitcast_convert {{.*}} -> tensor<2xui64>
// CHECK: stablehlo.shift_right_logical
// CHECK: stablehlo.complex {{.*}} : tensor<2xcomplex<f32>>
// CHECK: stablehlo.imag %arg0
// CHECK: stablehlo.concatenate {{.*}}, dim = 1 : {{.*}} -> tensor<2x2xcomplex<f32>>
func.func @main(%a: tensor<2xcomplex<f64>>) -> tensor<2x2xcomplex<f32>> {
  %0 = stablehlo.bitcast_convert %a : (tensor<2xcomplex<f64>>) -> tensor<2x2xcomplex<f32>>
  return %0 : tensor<2x2xcomplex<f32>>
}
