// RUN: not kiln-opt %s --stage verify 2>&1 | FileCheck %s

// An LLVM function attribute on the entry would reach LLVM through func-to-llvm (here: LLVM
// would call libc's abort() in the prologue). It is refused, located, before any pass runs.
// CHECK: kiln-opt: error: {{.*}}refuse_passthrough.mlir:8:1: attribute 'passthrough' on @main is not allowed in an input program
// CHECK-SAME: steer LLVM
// CHECK-NOT: Traceback
func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> attributes {passthrough = [["probe-stack", "abort"], ["stack-probe-size", "1"]]} {
  %0 = stablehlo.add %x, %x : tensor<2xf32>
  return %0 : tensor<2xf32>
}
