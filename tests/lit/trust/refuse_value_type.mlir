// RUN: not kiln-opt %s --stage verify 2>&1 | FileCheck %s

// A value type no XLA program can hold (a pointer, here on a private function's argument)
// is refused, located, before any pass reads the program: types are checked by allowlist.
// CHECK: kiln-opt: error: {{.*}}refuse_value_type.mlir:8:1: argument 0 of @helper has type !llvm.ptr, which an XLA program cannot hold
// CHECK-SAME: tensors of XLA's element types
// CHECK-NOT: Traceback
func.func private @helper(%p: !llvm.ptr) {
  return
}
func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {
  return %x : tensor<2xf32>
}
