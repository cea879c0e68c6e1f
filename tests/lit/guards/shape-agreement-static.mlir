// RUN: kiln-opt %s --pass kiln-guard-run-time-shapes | FileCheck %s
// A module whose shapes are all static (elementwise, transpose, dot_general, slice) is left
// as it was: no declaration, no global.
// CHECK-NOT: kiln_runtime_check_failed
// CHECK-NOT: memref.global
// CHECK: func.func @main
// CHECK-NOT: tensor.dim
// CHECK-NOT: scf.if
// CHECK: return
func.func @main(%x: tensor<4x3xf32>, %y: tensor<3x4xf32>) -> tensor<4x4xf32> {
  %t = stablehlo.transpose %y, dims = [1, 0] : (tensor<3x4xf32>) -> tensor<4x3xf32>
  %a = stablehlo.add %x, %t : tensor<4x3xf32>
  %d = stablehlo.dot_general %a, %y, contracting_dims = [1] x [0] : (tensor<4x3xf32>, tensor<3x4xf32>) -> tensor<4x4xf32>
  %s = stablehlo.slice %d [0:2, 1:4] : (tensor<4x4xf32>) -> tensor<2x3xf32>
  return %d : tensor<4x4xf32>
}
