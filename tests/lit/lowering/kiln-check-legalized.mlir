// RUN: not kiln-opt %s --pass kiln-check-legalized --split-input-file 2> %t.err | FileCheck %s
// RUN: FileCheck %s --check-prefix=ERR < %t.err

// Fully legalized code passes unchanged.
// CHECK-LABEL: func.func @main
// CHECK-NEXT: arith.addf
func.func @main(%x: f32) -> f32 {
  %0 = arith.addf %x, %x : f32
  return %0 : f32
}

// -----

// A StableHLO op left over is named, with its place.
// ERR: kiln-check-legalized.mlir:[[# @LINE + 2]]:8: Kiln cannot lower 'stablehlo.add' here yet
func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {
  %0 = stablehlo.add %x, %x : tensor<2xf32>
  return %0 : tensor<2xf32>
}
