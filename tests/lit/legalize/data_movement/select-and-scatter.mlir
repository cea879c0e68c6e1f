// RUN: kiln-opt %s --stage legalize | FileCheck %s

// select_and_scatter: the result starts as init_value; per source element a window walk
// keeps the selected coordinates (padding is skipped), then the scatter region combines.
// CHECK-LABEL: func.func @main
// CHECK: linalg.fill
// CHECK: scf.for {{.*}} -> (tensor<4x2xi64>)
// CHECK: scf.for {{.*}} -> (i1, index, index)
// CHECK: arith.cmpi sge, {{.*}} : i64
// CHECK: scf.if
// CHECK: arith.addi {{.*}} : i64
// CHECK: tensor.insert
// CHECK-NOT: stablehlo.
func.func @main(%operand: tensor<4x2xi64>, %source: tensor<2x2xi64>, %init: tensor<i64>) -> tensor<4x2xi64> {
  %0 = "stablehlo.select_and_scatter"(%operand, %source, %init) ({
  ^bb0(%a: tensor<i64>, %b: tensor<i64>):
    %ge = stablehlo.compare GE, %a, %b : (tensor<i64>, tensor<i64>) -> tensor<i1>
    stablehlo.return %ge : tensor<i1>
  }, {
  ^bb0(%a: tensor<i64>, %b: tensor<i64>):
    %s = stablehlo.add %a, %b : tensor<i64>
    stablehlo.return %s : tensor<i64>
  }) {window_dimensions = array<i64: 3, 1>, window_strides = array<i64: 2, 1>,
      padding = dense<[[0, 1], [0, 0]]> : tensor<2x2xi64>} : (tensor<4x2xi64>, tensor<2x2xi64>, tensor<i64>) -> tensor<4x2xi64>
  return %0 : tensor<4x2xi64>
}
