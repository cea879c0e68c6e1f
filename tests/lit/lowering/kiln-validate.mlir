// RUN: not kiln-opt %s --pass kiln-validate --split-input-file 2> %t.err | FileCheck %s
// RUN: FileCheck %s --check-prefix=ERR < %t.err

// A valid StableHLO program passes unchanged.
// CHECK-LABEL: func.func @main
// CHECK-NEXT: stablehlo.add
func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {
  %0 = stablehlo.add %a, %a : tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

// Dialects that can address memory are rejected at the trust boundary, with the place of
// the first value or op that names them (here the memref argument: types by allowlist).
// ERR: kiln-validate.mlir:[[# @LINE + 2]]:{{[0-9]+}}: argument 0 of @main has type memref<2xf32>, which an XLA program cannot hold
// CHECK: // -----
func.func @main(%m: memref<2xf32>, %i: index) -> f32 {
  %0 = memref.load %m[%i] : memref<2xf32>
  return %0 : f32
}
