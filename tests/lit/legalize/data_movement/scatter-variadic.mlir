// RUN: kiln-opt %s --stage legalize | FileCheck %s

// Variadic scatter carries both results through one loop nest; the region sees
// (operand0, operand1, update0, update1). Unsigned indices are widened to i64 first.
// CHECK-LABEL: func.func @main
// CHECK: arith.extui
// CHECK: scf.for {{.*}} -> (tensor<6xi32>, tensor<6xf32>)
// CHECK: scf.if
// CHECK: arith.cmpi sgt
// CHECK: arith.select {{.*}} : f32
// CHECK-COUNT-2: tensor.insert
// CHECK-NOT: stablehlo.
func.func @main(%k: tensor<6xi32>, %v: tensor<6xf32>, %idx: tensor<3x1xui32>, %uk: tensor<3xi32>, %uv: tensor<3xf32>) -> (tensor<6xi32>, tensor<6xf32>) {
  %0:2 = "stablehlo.scatter"(%k, %v, %idx, %uk, %uv) ({
  ^bb0(%ok: tensor<i32>, %ov: tensor<f32>, %nk: tensor<i32>, %nv: tensor<f32>):
    %gt = stablehlo.compare GT, %nk, %ok : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %rk = stablehlo.select %gt, %nk, %ok : tensor<i1>, tensor<i32>
    %rv = stablehlo.select %gt, %nv, %ov : tensor<i1>, tensor<f32>
    stablehlo.return %rk, %rv : tensor<i32>, tensor<f32>
  }) {scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [0],
      scatter_dims_to_operand_dims = [0], index_vector_dim = 1>}
     : (tensor<6xi32>, tensor<6xf32>, tensor<3x1xui32>, tensor<3xi32>, tensor<3xf32>) -> (tensor<6xi32>, tensor<6xf32>)
  return %0#0, %0#1 : tensor<6xi32>, tensor<6xf32>
}
