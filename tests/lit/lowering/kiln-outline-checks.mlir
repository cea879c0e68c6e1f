// RUN: kiln-opt %s --pass kiln-outline-checks --split-input-file | FileCheck %s

// Checks (ops or custom calls) become extra results of the entry, described in kiln.checks;
// kiln.user_results counts the program's own results.
// CHECK-LABEL: func.func @main
// CHECK-SAME: -> (tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xi32>, tensor<2xi32>)
// CHECK-SAME: kiln.checks = "[{\22kind\22: \22expect_close\22, \22results\22: [1, 2]
// CHECK-SAME: {\22kind\22: \22expect_eq_const\22, \22results\22: [3, 4]
// CHECK-SAME: kiln.user_results = 1
// CHECK-NOT: custom_call
// CHECK-NOT: check.
// CHECK: return %[[T:[0-9a-z_]+]], %[[T]], %{{.*}}, %{{.*}}, %{{.*}} :
func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {
  %0 = stablehlo.tanh %a : tensor<2xf32>
  %e = stablehlo.constant dense<[0.0, 0.5]> : tensor<2xf32>
  stablehlo.custom_call @check.expect_close(%0, %e) {has_side_effect = true} : (tensor<2xf32>, tensor<2xf32>) -> ()
  %i = stablehlo.constant dense<[1, 2]> : tensor<2xi32>
  check.expect_eq_const %i, dense<[1, 2]> : tensor<2xi32>
  return %0 : tensor<2xf32>
}

// -----

// Without checks the entry is unchanged.
// CHECK-LABEL: func.func @main
// CHECK-SAME: (%{{.*}}: tensor<2xf32>) -> tensor<2xf32> {
// CHECK-NEXT: return
func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {
  return %a : tensor<2xf32>
}
