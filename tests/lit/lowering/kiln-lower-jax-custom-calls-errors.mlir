// RUN: not kiln-opt %s --pass kiln-lower-jax-custom-calls 2>&1 | FileCheck %s

// A constant false predicate is the export's error, its {0} formatted with the argument.
// CHECK: Expected value >= 1 for dimension variable 'b'; got b = 0
func.func @failing() {
  %f = stablehlo.constant dense<false> : tensor<i1>
  %z = stablehlo.constant dense<0> : tensor<i32>
  stablehlo.custom_call @shape_assertion(%f, %z) {api_version = 2 : i32, error_message = "Expected value >= 1 for dimension variable 'b'; got b = {0}", has_side_effect = true} : (tensor<i1>, tensor<i32>) -> ()
  return
}
