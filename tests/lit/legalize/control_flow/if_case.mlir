// RUN: kiln-opt %s --stage legalize --split-input-file | FileCheck %s

// stablehlo.if becomes scf.if on the extracted i1.
// CHECK-LABEL: func.func @if
// CHECK: %[[P:.*]] = tensor.extract %{{.*}}[] : tensor<i1>
// CHECK: scf.if %[[P]] -> (tensor<2xf32>)
// CHECK: scf.yield
// CHECK: } else {
// CHECK: scf.yield
// CHECK-NOT: stablehlo.
func.func @if(%p: tensor<i1>, %x: tensor<2xf32>) -> tensor<2xf32> {
  %0 = "stablehlo.if"(%p) ({
    %a = stablehlo.add %x, %x : tensor<2xf32>
    stablehlo.return %a : tensor<2xf32>
  }, {
    stablehlo.return %x : tensor<2xf32>
  }) : (tensor<i1>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

// stablehlo.case becomes scf.index_switch: branches 0 and 1 are cases, and the last branch is
// the default, which the spec runs for any index outside [0, N). Its 0-d result is a scalar.
// CHECK-LABEL: func.func @case
// CHECK: %[[I:.*]] = arith.index_cast %{{.*}} : i32 to index
// CHECK: scf.index_switch %[[I]] -> i32
// CHECK: case 0 {
// CHECK: case 1 {
// CHECK: default {
// CHECK-NOT: stablehlo.
func.func @case(%i: tensor<i32>) -> tensor<i32> {
  %0 = "stablehlo.case"(%i) ({
    %c = stablehlo.constant dense<10> : tensor<i32>
    stablehlo.return %c : tensor<i32>
  }, {
    %c = stablehlo.constant dense<11> : tensor<i32>
    stablehlo.return %c : tensor<i32>
  }, {
    %c = stablehlo.constant dense<12> : tensor<i32>
    stablehlo.return %c : tensor<i32>
  }) : (tensor<i32>) -> tensor<i32>
  return %0 : tensor<i32>
}
