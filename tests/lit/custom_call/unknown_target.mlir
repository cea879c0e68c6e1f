// RUN: not kiln-opt %s --stage legalize 2>&1 | FileCheck %s

// Targets are resolved when the call is lowered: an unknown one is an error naming it, with
// the registered CPU targets and how to register it.
// CHECK: unknown_target.mlir:8:8: unknown custom-call target 'no_such_kernel' (registered CPU targets: {{.*}}; register it with kiln.register_custom_call or kiln.register_custom_call_library)
// CHECK-NOT: Traceback
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.custom_call @no_such_kernel(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
