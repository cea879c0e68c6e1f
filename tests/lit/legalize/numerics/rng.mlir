// RUN: kiln-opt %s --stage legalize | FileCheck %s

// A float NORMAL rng is Box-Muller over two uniforms, each hashed from the element index with
// the 32-bit finalizer (multipliers 0x7feb352d and 0x846ca68b, shifts 16/15/16) and scaled by
// 2^-24 after keeping the top 24 bits. No stablehlo.rng is left for upstream (which has no
// NORMAL).
// CHECK-LABEL: func.func @main
// CHECK-DAG: arith.constant dense<5.96046448E-8> : tensor<f32>
// CHECK-DAG: arith.constant dense<-2073254261> : tensor<i32>
// CHECK-DAG: arith.constant dense<2146121005> : tensor<i32>
// CHECK: arith.xori
// CHECK: arith.uitofp %{{.*}} : i32 to f32
// CHECK: math.log
// CHECK: math.sqrt
// CHECK: math.cos
// CHECK-NOT: stablehlo.
func.func @main(%mu: tensor<f32>, %sigma: tensor<f32>) -> tensor<3x5xf32> {
  %s = stablehlo.constant dense<[3, 5]> : tensor<2xi64>
  %0 = stablehlo.rng %mu, %sigma, %s, distribution = NORMAL : (tensor<f32>, tensor<f32>, tensor<2xi64>) -> tensor<3x5xf32>
  return %0 : tensor<3x5xf32>
}
