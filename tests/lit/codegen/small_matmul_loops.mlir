// RUN: kiln-opt %s --stage codegen | FileCheck %s

// Small products (and integer ones) stay loop nests: a library call would not pay off, and
// small programs keep compiling fast.
// CHECK-LABEL: func.func @main
// CHECK-NOT: kiln_blas
// CHECK: scf.for
// CHECK: arith.mulf
// CHECK-NOT: kiln_blas
func.func @main(%a: tensor<4x8xf32>, %b: tensor<8x2xf32>, %c: tensor<64x64xi32>) -> (tensor<4x2xf32>, tensor<64x64xi32>) {
  %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : (tensor<4x8xf32>, tensor<8x2xf32>) -> tensor<4x2xf32>
  %1 = stablehlo.dot_general %c, %c, contracting_dims = [1] x [0] : (tensor<64x64xi32>, tensor<64x64xi32>) -> tensor<64x64xi32>
  return %0, %1 : tensor<4x2xf32>, tensor<64x64xi32>
}
