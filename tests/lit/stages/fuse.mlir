// RUN: kiln-opt %s --stage legalize | FileCheck %s --check-prefix=BEFORE
// RUN: kiln-opt %s --stage fuse | FileCheck %s

// Three elementwise ops become one loop nest (XLA's loop fusion).
// BEFORE-COUNT-3: linalg.generic
// CHECK-LABEL: func.func @main
// CHECK: linalg.generic
// CHECK: arith.addf
// CHECK: arith.mulf
// CHECK: math.tanh
// CHECK-NOT: linalg.generic
func.func @main(%a: tensor<16x16xf32>, %b: tensor<16x16xf32>) -> tensor<16x16xf32> {
  %0 = stablehlo.add %a, %b : tensor<16x16xf32>
  %1 = stablehlo.multiply %0, %b : tensor<16x16xf32>
  %2 = stablehlo.tanh %1 : tensor<16x16xf32>
  return %2 : tensor<16x16xf32>
}
