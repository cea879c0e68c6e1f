// RUN: kiln-opt %s --pass kiln-lower-control-flow --split-input-file | FileCheck %s

// stablehlo.while becomes scf.while; the body stays StableHLO for upstream.
// CHECK-LABEL: func.func @main
// CHECK-NOT: stablehlo.while
// CHECK: scf.while
// CHECK: scf.condition
// CHECK: stablehlo.add
// CHECK: scf.yield
func.func @main(%n: tensor<i32>) -> tensor<i32> {
  %zero = stablehlo.constant dense<0> : tensor<i32>
  %one = stablehlo.constant dense<1> : tensor<i32>
  %0 = stablehlo.while(%i = %zero) : tensor<i32>
   cond {
    %c = stablehlo.compare LT, %i, %n : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  } do {
    %next = stablehlo.add %i, %one : tensor<i32>
    stablehlo.return %next : tensor<i32>
  }
  return %0 : tensor<i32>
}

// -----

// stablehlo.if becomes scf.if on the extracted predicate.
// CHECK-LABEL: func.func @main
// CHECK: tensor.extract
// CHECK: scf.if
// CHECK: stablehlo.negate
// CHECK: } else {
func.func @main(%p: tensor<i1>, %a: tensor<2xf32>) -> tensor<2xf32> {
  %0 = "stablehlo.if"(%p) ({
    %n = stablehlo.negate %a : tensor<2xf32>
    stablehlo.return %n : tensor<2xf32>
  }, {
    stablehlo.return %a : tensor<2xf32>
  }) : (tensor<i1>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

// Straight-line code is left alone.
// CHECK-LABEL: func.func @main
// CHECK-NEXT: stablehlo.negate
func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {
  %0 = stablehlo.negate %a : tensor<2xf32>
  return %0 : tensor<2xf32>
}
