// RUN: kiln-opt %s --stage legalize | FileCheck %s

// stablehlo.while becomes scf.while: the cond region ends in scf.condition on the predicate,
// forwarding every carried value (two separate values, no tuple); the body ends in scf.yield.
// 0-d values are carried as scalars, and the 0-d ops on them are scalar code.
// CHECK-LABEL: func.func @main
// CHECK: %[[R:.*]]:2 = scf.while (%[[I:[a-z0-9_]+]] = %{{.*}}, %[[S:[a-z0-9_]+]] = %{{.*}}) : (i64, i64) -> (i64, i64)
// CHECK: %[[P:.*]] = arith.cmpi slt, %[[I]], %{{.*}} : i64
// CHECK: scf.condition(%[[P]]) %[[I]], %[[S]] : i64, i64
// CHECK: } do {
// CHECK: scf.yield %{{.*}}, %{{.*}} : i64, i64
// CHECK-NOT: stablehlo.
func.func @main(%n: tensor<i64>) -> (tensor<i64>, tensor<i64>) {
  %zero = stablehlo.constant dense<0> : tensor<i64>
  %one = stablehlo.constant dense<1> : tensor<i64>
  %r0, %r1 = stablehlo.while(%i = %zero, %s = %zero) : tensor<i64>, tensor<i64>
  cond {
    %c = stablehlo.compare LT, %i, %n : (tensor<i64>, tensor<i64>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  } do {
    %i1 = stablehlo.add %i, %one : tensor<i64>
    %s1 = stablehlo.add %s, %i : tensor<i64>
    stablehlo.return %i1, %s1 : tensor<i64>, tensor<i64>
  }
  return %r0, %r1 : tensor<i64>, tensor<i64>
}
