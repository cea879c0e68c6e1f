// RUN: kiln-opt %s --stage optimize | FileCheck %s

// optimize inlines calls into the entry, drops the dead helpers, and turns checks into
// extra results that the runtime compares; a value returned twice is returned once.
// CHECK-LABEL: func.func @main
// CHECK-SAME: -> (tensor<4xf32>, tensor<4xf32>)
// CHECK-SAME: kiln.checks = "[{\22kind\22: \22expect_close\22, \22results\22: [1, 2]
// CHECK-SAME: kiln.result_sources = array<i64: 0, 0, 1>
// CHECK-SAME: kiln.user_results = 1
// CHECK-NOT: call
// CHECK: stablehlo.tanh
// CHECK-NOT: stablehlo.custom_call
// CHECK: return
// CHECK-NOT: func.func private @helper
func.func @main() -> tensor<4xf32> {
  %a = stablehlo.constant dense<[0.0, 1.0, 2.0, 3.0]> : tensor<4xf32>
  %1 = call @helper(%a) : (tensor<4xf32>) -> tensor<4xf32>
  %e = stablehlo.constant dense<[0.0, 0.7615942, 0.9640276, 0.9950548]> : tensor<4xf32>
  stablehlo.custom_call @check.expect_close(%1, %e) {has_side_effect = true} : (tensor<4xf32>, tensor<4xf32>) -> ()
  return %1 : tensor<4xf32>
}
func.func private @helper(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.tanh %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}
