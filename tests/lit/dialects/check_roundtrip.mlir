// RUN: kiln-opt %s | FileCheck %s
// RUN: kiln-opt %s | kiln-opt - | FileCheck %s

// Every check op in custom form is read into the registered `check` dialect (printed in its
// generic form), keeps its own position, and parses again from that printed form.
// CHECK-LABEL: func.func @main
// CHECK: "check.expect_eq"(%{{.*}}, %{{.*}}) : (tensor<2xi32>, tensor<2xi32>) -> ()
// CHECK: "check.expect_eq_const"(%{{.*}}) {value = dense<[1, 2]> : tensor<2xi32>} : (tensor<2xi32>) -> ()
// CHECK: "check.expect_almost_eq"(%{{.*}}, %{{.*}}) {tolerance = 1.000000e-01 : f64} : (tensor<f32>, tensor<f32>) -> ()
// CHECK: "check.expect_almost_eq_const"(%{{.*}}) {tolerance = 5.000000e-01 : f64, value = dense<(1.000000e+00,2.000000e+00)> : tensor<complex<f32>>}
// CHECK: "check.expect_close"(%{{.*}}, %{{.*}}) {max_ulp_difference = 3 : i64, min_ulp_difference = 1 : i64} : (tensor<f32>, tensor<f32>) -> ()
// CHECK: "check.expect_serialized_eq"(%{{.*}}) {iter = 2 : i32, probe_id = "probe1"} : (tensor<2xi32>) -> ()
// Properties syntax (StableHLO's generic test data) becomes the op's attributes.
// CHECK: "check.expect_eq_const"(%{{.*}}) {value = dense<[1, 2]> : tensor<2xi32>} : (tensor<2xi32>) -> ()
// CHECK: return
func.func @main() {
  %a = stablehlo.constant dense<[1, 2]> : tensor<2xi32>
  %f = stablehlo.constant dense<1.0> : tensor<f32>
  %z = stablehlo.constant dense<(1.0, 2.0)> : tensor<complex<f32>>
  check.expect_eq %a, %a : tensor<2xi32>
  check.expect_eq_const %a,
      dense<[1, 2]> : tensor<2xi32>
  check.expect_almost_eq %f, %f, tolerance = 0.1 : tensor<f32>
  check.expect_almost_eq_const %z, dense<(1.0, 2.0)> : tensor<complex<f32>>, tolerance = 0.5
  check.expect_close %f, %f, min_ulp_difference = 1, max_ulp_difference = 3 : tensor<f32>, tensor<f32>
  check.expect_serialized_eq %a, probe_id = "probe1", iter = 2 : tensor<2xi32>
  "check.expect_eq_const"(%a) <{value = dense<[1, 2]> : tensor<2xi32>}> : (tensor<2xi32>) -> ()
  func.return
}
