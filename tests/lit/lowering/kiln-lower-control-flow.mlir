// RUN: kiln-opt %s --pass kiln-lower-control-flow --split-input-file | FileCheck %s

// stablehlo.while becomes scf.while; the body stays StableHLO for upstream.
// CHECK-LABEL: func.func @main
// CHECK-NOT: stablehlo.while
// CHECK: scf.while
// CHECK: scf.condition
// CHECK: stablehlo.add
// CHECK: scf.yield %{{.*}} : i32
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

// 0-d values ride through the loop as scalars: the while carries an i32 and an f32 beside
// the vector, each region rewraps them in tensor.from_elements for the StableHLO inside, and
// the loop is marked for kiln-scalarize-0d-loops.
// CHECK-LABEL: func.func @main
// CHECK: %[[I0:[a-z0-9_]+]] = tensor.extract %{{.*}}[] : tensor<i32>
// CHECK: %[[S0:[a-z0-9_]+]] = tensor.extract %arg1[] : tensor<f32>
// CHECK: %[[R:[a-z0-9_]+]]:3 = scf.while (%[[I:[a-z0-9_]+]] = %[[I0]], %[[V:[a-z0-9_]+]] = %arg0, %[[S:[a-z0-9_]+]] = %[[S0]]) : (i32, tensor<4xf32>, f32) -> (i32, tensor<4xf32>, f32)
// CHECK: tensor.from_elements %[[I]] : tensor<i32>
// CHECK: scf.condition(%{{.*}}) %[[I]], %[[V]], %[[S]] : i32, tensor<4xf32>, f32
// CHECK: } do {
// CHECK: ^bb0(%[[BI:[a-z0-9_]+]]: i32, %[[BV:[a-z0-9_]+]]: tensor<4xf32>, %[[BS:[a-z0-9_]+]]: f32):
// CHECK-DAG: tensor.from_elements %[[BI]] : tensor<i32>
// CHECK-DAG: tensor.from_elements %[[BS]] : tensor<f32>
// CHECK: scf.yield %{{.*}}, %{{.*}}, %{{.*}} : i32, tensor<4xf32>, f32
// CHECK: } attributes {kiln.scalarize}
// CHECK: tensor.from_elements %[[R]]#2 : tensor<f32>
func.func @main(%v: tensor<4xf32>, %s: tensor<f32>) -> (tensor<4xf32>, tensor<f32>) {
  %zero = stablehlo.constant dense<0> : tensor<i32>
  %one = stablehlo.constant dense<1> : tensor<i32>
  %n = stablehlo.constant dense<10> : tensor<i32>
  %0:3 = stablehlo.while(%i = %zero, %x = %v, %y = %s) : tensor<i32>, tensor<4xf32>, tensor<f32>
   cond {
    %c = stablehlo.compare LT, %i, %n : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  } do {
    %i1 = stablehlo.add %i, %one : tensor<i32>
    %x1 = stablehlo.add %x, %x : tensor<4xf32>
    %y1 = stablehlo.multiply %y, %y : tensor<f32>
    stablehlo.return %i1, %x1, %y1 : tensor<i32>, tensor<4xf32>, tensor<f32>
  }
  return %0#1, %0#2 : tensor<4xf32>, tensor<f32>
}

// -----

// A branch's 0-d results are scalars too.
// CHECK-LABEL: func.func @main
// CHECK: %[[R:[a-z0-9_]+]] = scf.if %{{.*}} -> (f32) {
// CHECK: stablehlo.negate
// CHECK: %[[N:[a-z0-9_]+]] = tensor.extract %{{.*}}[] : tensor<f32>
// CHECK: scf.yield %[[N]] : f32
// CHECK: } else {
// CHECK: tensor.extract %arg1[] : tensor<f32>
// CHECK: } {kiln.scalarize}
// CHECK: tensor.from_elements %[[R]] : tensor<f32>
func.func @main(%p: tensor<i1>, %a: tensor<f32>) -> tensor<f32> {
  %0 = "stablehlo.if"(%p) ({
    %n = stablehlo.negate %a : tensor<f32>
    stablehlo.return %n : tensor<f32>
  }, {
    stablehlo.return %a : tensor<f32>
  }) : (tensor<i1>) -> tensor<f32>
  return %0 : tensor<f32>
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
