// RUN: kiln-opt %s --stage import | FileCheck %s
// RUN: kiln-opt %s --stage optimize | FileCheck %s --check-prefix=OPT

// The check dialect's custom syntax (StableHLO's interpreter tests) is read into the
// registered check ops (dialects/check.py) at import; outlining a `_const` check compares
// against a stablehlo.constant of its value.
// CHECK-LABEL: func.func @main
// CHECK: %[[A:[a-z0-9_]+]] = stablehlo.constant dense<[1, 2]> : tensor<2xi32>
// CHECK: "check.expect_eq_const"(%[[A]]) {value = dense<[1, 2]> : tensor<2xi32>} : (tensor<2xi32>) -> ()
// CHECK: "check.expect_almost_eq"(%{{.*}}, %{{.*}}) {tolerance = 1.000000e-01 : f64}
// CHECK: "check.expect_close"(%{{.*}}, %{{.*}}) {max_ulp_difference = 3 : i64} : (tensor<f32>, tensor<f32>) -> ()
// Outlined, the checks are extra results of the entry.
// OPT: func.func @main() -> (tensor<2xi32>, tensor<f32>)
// OPT-SAME: kiln.checks = {{.*}}expect_eq{{.*}}expect_almost_eq{{.*}}expect_close
func.func @main() {
  %a = stablehlo.constant dense<[1, 2]> : tensor<2xi32>
  %f = stablehlo.constant dense<1.0> : tensor<f32>
  check.expect_eq_const %a,
      dense<[1, 2]> : tensor<2xi32>
  check.expect_almost_eq %f, %f, tolerance = 0.1 : tensor<f32>
  check.expect_close %f, %f, max_ulp_difference = 3 : tensor<f32>, tensor<f32>
  func.return
}
