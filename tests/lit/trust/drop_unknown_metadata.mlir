// RUN: kiln-opt %s --stage verify | FileCheck %s

// XLA's metadata Kiln keeps stays; metadata of XLA's namespaces it does not know is dropped.
// CHECK-LABEL: func.func @main
// CHECK-SAME: mhlo.sharding = "{replicated}"
// CHECK-NOT: jax.new_thing
// CHECK-SAME: jax.result_info = "r"
// CHECK-NOT: mhlo.future_thing
// CHECK: stablehlo.add
func.func @main(%x: tensor<2xf32> {mhlo.sharding = "{replicated}", jax.new_thing = 1 : i64}) -> (tensor<2xf32> {jax.result_info = "r"}) attributes {mhlo.future_thing = "x"} {
  %0 = stablehlo.add %x, %x : tensor<2xf32>
  return %0 : tensor<2xf32>
}
