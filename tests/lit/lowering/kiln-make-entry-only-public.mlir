// RUN: kiln-opt %s --pass kiln-make-entry-only-public --split-input-file | FileCheck %s

// Every function but the entry (@main) becomes private, so inlining and symbol-dce can fold
// the program into it; declarations are left alone.
// CHECK-LABEL: func.func private @helper
// CHECK-LABEL: func.func @main
// CHECK: func.func private @declared
func.func @helper(%a: tensor<2xf32>) -> tensor<2xf32> {
  return %a : tensor<2xf32>
}
func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {
  %0 = call @helper(%a) : (tensor<2xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}
func.func private @declared(tensor<2xf32>) -> tensor<2xf32>

// -----

// Without @main, the only public function is the entry.
// CHECK-LABEL: func.func private @inner
// CHECK-LABEL: func.func @only_public
func.func private @inner(%a: tensor<2xf32>) -> tensor<2xf32> {
  return %a : tensor<2xf32>
}
func.func @only_public(%a: tensor<2xf32>) -> tensor<2xf32> {
  %0 = call @inner(%a) : (tensor<2xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

// A module without functions is left as it is.
// CHECK: module {
// CHECK-NEXT: }
module {
}
