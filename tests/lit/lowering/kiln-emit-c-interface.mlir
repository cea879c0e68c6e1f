// RUN: kiln-opt %s --pass kiln-emit-c-interface --split-input-file | FileCheck %s

// The entry gets a C interface, and its arguments (the caller's arrays) become read-only
// for bufferization; other functions are left alone.
// CHECK-LABEL: func.func private @helper
// CHECK-NOT: emit_c_interface
// CHECK-LABEL: func.func @main
// CHECK-SAME: %{{.*}}: tensor<2xf32> {bufferization.writable = false}
// CHECK-SAME: attributes {llvm.emit_c_interface}
func.func private @helper(%a: tensor<2xf32>) -> tensor<2xf32> {
  return %a : tensor<2xf32>
}
func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {
  %0 = call @helper(%a) : (tensor<2xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

// A module without functions is left as it is.
// CHECK: module {
// CHECK-NEXT: }
module {
}
