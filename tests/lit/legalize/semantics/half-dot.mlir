// RUN: kiln-opt %s --stage legalize | FileCheck %s

// f16/bf16 matrix products accumulate in f32 and round once, as XLA:CPU computes them.
// CHECK-LABEL: func.func @main
// CHECK: arith.extf {{.*}} : bf16 to f32
// CHECK: linalg.matmul {{.*}} -> tensor<2x2xf32>
// CHECK: arith.bitcast {{.*}} : i16 to bf16
func.func @main(%a: tensor<2x8xbf16>, %b: tensor<8x2xbf16>) -> tensor<2x2xbf16> {
  %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : (tensor<2x8xbf16>, tensor<8x2xbf16>) -> tensor<2x2xbf16>
  return %0 : tensor<2x2xbf16>
}
