// RUN: kiln-opt %s --stage import | FileCheck %s

// Elementwise CHLO math on bf16 is computed in f32 and rounded once, as XLA's CPU backend
// does; next_after is bit-level and keeps its type.
// CHECK-LABEL: func.func @main
// CHECK: stablehlo.convert %{{.*}} : (tensor<4xbf16>) -> tensor<4xf32>
// CHECK: stablehlo.log
// CHECK: stablehlo.convert %{{.*}} : (tensor<4xf32>) -> tensor<4xbf16>
// CHECK: stablehlo.bitcast_convert %{{.*}} : (tensor<4xbf16>) -> tensor<4xi16>
func.func @main(%x: tensor<4xbf16>) -> (tensor<4xbf16>, tensor<4xbf16>) {
  %0 = chlo.asinh %x : tensor<4xbf16> -> tensor<4xbf16>
  %1 = chlo.next_after %x, %0 : tensor<4xbf16>, tensor<4xbf16> -> tensor<4xbf16>
  return %0, %1 : tensor<4xbf16>, tensor<4xbf16>
}
