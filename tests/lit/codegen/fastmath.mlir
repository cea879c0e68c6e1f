// RUN: kiln-opt %s --stage codegen | FileCheck %s

// f32 exp becomes plain arithmetic (range reduction, Cephes polynomial, exponent bits) that
// LLVM can vectorize, with NaN passed through by a select; f64 exp too (f64math.py), its
// 2^k from 64-bit exponent bits.
// The accumulating add of the reduction gets `reassoc` so its loop vectorizes too.
// CHECK-LABEL: func.func @main
// CHECK-NOT: math.exp {{.*}} : f32
// CHECK: math.floor
// CHECK: math.fma
// CHECK: arith.shli
// CHECK: arith.bitcast {{.*}} : i32 to f32
// CHECK: arith.cmpf uno
// CHECK: arith.select
// CHECK-NOT: math.exp
// CHECK: arith.bitcast {{.*}} : i64 to f64
// CHECK: arith.addf {{.*}} fastmath<reassoc> : f32
func.func @main(%x: tensor<64xf32>, %y: tensor<8xf64>) -> (tensor<64xf32>, tensor<8xf64>, tensor<f32>) {
  %0 = stablehlo.exponential %x : tensor<64xf32>
  %1 = stablehlo.exponential %y : tensor<8xf64>
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %2 = stablehlo.reduce(%x init: %z) applies stablehlo.add across dimensions = [0] : (tensor<64xf32>, tensor<f32>) -> tensor<f32>
  return %0, %1, %2 : tensor<64xf32>, tensor<8xf64>, tensor<f32>
}
