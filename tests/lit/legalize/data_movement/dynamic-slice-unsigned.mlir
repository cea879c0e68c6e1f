// RUN: kiln-opt %s --stage legalize | FileCheck %s

// Unsigned start indices are bounded with an unsigned min and zero-extended to i64 before
// upstream's lowering, which would read them as signed (ui8 200 -> -56 -> clamped to 0).
// The first dimension (300) exceeds every ui8, so its bound folds away.
// CHECK-LABEL: func.func @main
// CHECK-NOT: arith.minui
// CHECK: arith.extui %{{.*}} : i8 to i64
// CHECK: arith.minui %{{.*}}, %{{.*}} : i8
// CHECK: arith.extui %{{.*}} : i8 to i64
// CHECK: tensor.extract_slice
// CHECK-NOT: stablehlo.
func.func @main(%x: tensor<300x6xf32>, %i: tensor<ui8>, %j: tensor<ui8>) -> tensor<2x4xf32> {
  %0 = stablehlo.dynamic_slice %x, %i, %j, sizes = [2, 4] : (tensor<300x6xf32>, tensor<ui8>, tensor<ui8>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}
