// RUN: kiln-opt %s --pass kiln-lower-control-flow,kiln-guard-run-time-shapes | FileCheck %s

// StableHLO accepts a branch that returns a dynamic size for a static result; scf does not.
// After kiln-lower-control-flow the yield is checked at run time against the declared size
// (the message names stablehlo.if: tests/py/test_trust_gaps.py), then cast to the declared type, so the IR verifies.
// CHECK-DAG: func.func private @kiln_runtime_check_failed(i64, i64)
// CHECK-LABEL: func.func @if_result
// CHECK: scf.if
// CHECK: tensor.dim %arg1
// CHECK: arith.cmpi ne, %{{.*}}, %c8_i64
// CHECK: scf.if
// CHECK: func.call @kiln_runtime_check_failed
// CHECK: %[[C:.*]] = tensor.cast %arg1 : tensor<?xf32> to tensor<8xf32>
// CHECK: scf.yield %[[C]] : tensor<8xf32>
// CHECK: } else {
// CHECK-NOT: tensor.cast
// CHECK: scf.yield %arg2 : tensor<8xf32>
func.func @if_result(%p: tensor<i1>, %x: tensor<?xf32>, %y: tensor<8xf32>) -> tensor<8xf32> {
  %r = "stablehlo.if"(%p) ({
    stablehlo.return %x : tensor<?xf32>
  }, {
    stablehlo.return %y : tensor<8xf32>
  }) : (tensor<i1>) -> tensor<8xf32>
  return %r : tensor<8xf32>
}
