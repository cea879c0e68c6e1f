// RUN: kiln-opt %s --pass kiln-lower-rng-normal | FileCheck %s

// Integer UNIFORM (which upstream rejects): a + (64 hashed bits mod (b - a)) in 64 bits, the
// span read as unsigned so b - a cannot overflow; b <= a gives a (span 1).
// CHECK-LABEL: func.func @main
// CHECK: stablehlo.convert %arg0 : (tensor<i8>) -> tensor<i64>
// CHECK: stablehlo.shift_left
// CHECK: stablehlo.or
// CHECK: %[[SPAN:.*]] = stablehlo.bitcast_convert %{{.*}} : (tensor<3x5xi64>) -> tensor<3x5xui64>
// CHECK: stablehlo.compare GT
// CHECK: stablehlo.select
// CHECK: stablehlo.remainder %{{.*}}, %{{.*}} : tensor<3x5xui64>
// CHECK: stablehlo.convert %{{.*}} : (tensor<3x5xi64>) -> tensor<3x5xi8>
// CHECK-NOT: stablehlo.rng
func.func @main(%a: tensor<i8>, %b: tensor<i8>) -> tensor<3x5xi8> {
  %s = stablehlo.constant dense<[3, 5]> : tensor<2xi64>
  %0 = stablehlo.rng %a, %b, %s, distribution = UNIFORM : (tensor<i8>, tensor<i8>, tensor<2xi64>) -> tensor<3x5xi8>
  return %0 : tensor<3x5xi8>
}
