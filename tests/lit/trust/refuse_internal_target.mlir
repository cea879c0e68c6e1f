// RUN: not kiln-opt %s --stage verify 2>&1 | FileCheck %s

// Kiln's own runtime targets trust their backend_config: a program may not call them.
// CHECK: kiln-opt: error: {{.*}}refuse_internal_target.mlir:7:8: custom call @kiln.collective.all_reduce names one of Kiln's internal runtime targets
// CHECK-NOT: Traceback
func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {
  %0 = stablehlo.custom_call @kiln.collective.all_reduce(%x) {backend_config = "{not json"} : (tensor<2xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}
