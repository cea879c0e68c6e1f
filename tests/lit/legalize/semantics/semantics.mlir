// RUN: kiln-opt %s --stage legalize --split-input-file | FileCheck %s

// i1 addition is logical OR (upstream would emit arith.addi, i.e. XOR).
// CHECK-LABEL: func.func @bool_add
// CHECK: arith.ori %{{.*}}, %{{.*}} : i1
// CHECK-NOT: arith.addi
func.func @bool_add(%a: tensor<4xi1>, %b: tensor<4xi1>) -> tensor<4xi1> {
  %0 = stablehlo.add %a, %b : tensor<4xi1>
  return %0 : tensor<4xi1>
}

// -----

// float -> int saturates as XLA does: <= INT_MIN -> INT_MIN, >= 2^31 -> INT_MAX, NaN -> 0.
// CHECK-LABEL: func.func @to_int
// CHECK-DAG: arith.constant -2.14748365E+9 : f32
// CHECK-DAG: arith.constant 2.14748365E+9 : f32
// CHECK: arith.fptosi
// CHECK: arith.cmpf ole
// CHECK: arith.cmpf oge
// CHECK: arith.cmpf une
func.func @to_int(%x: tensor<4xf32>) -> tensor<4xi32> {
  %0 = stablehlo.convert %x : (tensor<4xf32>) -> tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

// complex maximum compares (real, imaginary) lexicographically.
// CHECK-LABEL: func.func @cmax
// CHECK: complex.re
// CHECK: complex.im
// CHECK: arith.cmpf oeq
// CHECK: arith.cmpf ogt
// CHECK: arith.select
func.func @cmax(%a: tensor<2xcomplex<f32>>, %b: tensor<2xcomplex<f32>>) -> tensor<2xcomplex<f32>> {
  %0 = stablehlo.maximum %a, %b : tensor<2xcomplex<f32>>
  return %0 : tensor<2xcomplex<f32>>
}

// -----

// complex cbrt: |z|^(1/3) at a third of the argument.
// CHECK-LABEL: func.func @ccbrt
// CHECK: math.cbrt
// CHECK: math.atan2
// CHECK: math.cos
// CHECK: math.sin
// CHECK: complex.create
func.func @ccbrt(%z: tensor<2xcomplex<f64>>) -> tensor<2xcomplex<f64>> {
  %0 = stablehlo.cbrt %z : tensor<2xcomplex<f64>>
  return %0 : tensor<2xcomplex<f64>>
}

// -----

// log1p/expm1 call libm instead of LLVM's log(1 + x) / exp(x) - 1; bf16 goes through f32.
// CHECK-LABEL: func.func @small
// CHECK: arith.extf %{{.*}} : bf16 to f32
// CHECK: call @log1pf(%{{.*}}) : (f32) -> f32
// CHECK: arith.bitcast %{{.*}} : i16 to bf16
// CHECK: call @expm1(%{{.*}}) : (f64) -> f64
// CHECK: func.func private @log1pf(f32) -> f32
// CHECK: func.func private @expm1(f64) -> f64
func.func @small(%x: tensor<4xbf16>, %y: tensor<4xf64>) -> (tensor<4xbf16>, tensor<4xf64>) {
  %0 = stablehlo.log_plus_one %x : tensor<4xbf16>
  %1 = stablehlo.exponential_minus_one %y : tensor<4xf64>
  return %0, %1 : tensor<4xbf16>, tensor<4xf64>
}
