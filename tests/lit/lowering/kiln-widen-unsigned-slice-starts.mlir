// RUN: kiln-opt %s --pass kiln-widen-unsigned-slice-starts --split-input-file | FileCheck %s

// Unsigned start indices are bounded by the dimension (an unsigned comparison) and
// converted to i64, which upstream then reads correctly as signed.
// CHECK-LABEL: func.func @main
// CHECK: %[[I:.*]] = stablehlo.minimum %{{.*}}, %{{.*}} : tensor<ui8>
// CHECK: %[[I64:.*]] = stablehlo.convert %[[I]] : (tensor<ui8>) -> tensor<i64>
// CHECK: %[[J:.*]] = stablehlo.minimum %{{.*}}, %{{.*}} : tensor<ui8>
// CHECK: %[[J64:.*]] = stablehlo.convert %[[J]] : (tensor<ui8>) -> tensor<i64>
// CHECK: stablehlo.dynamic_slice %{{.*}}, %[[I64]], %[[J64]], sizes = [2, 4] : (tensor<300x6xf32>, tensor<i64>, tensor<i64>)
func.func @main(%x: tensor<300x6xf32>, %i: tensor<ui8>, %j: tensor<ui8>) -> tensor<2x4xf32> {
  %0 = stablehlo.dynamic_slice %x, %i, %j, sizes = [2, 4] : (tensor<300x6xf32>, tensor<ui8>, tensor<ui8>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

// Signed starts are left alone.
// CHECK-LABEL: func.func @main
// CHECK-NEXT: stablehlo.dynamic_slice %{{.*}}, %{{.*}}, %{{.*}}, sizes = [2, 4] : (tensor<300x6xf32>, tensor<i32>, tensor<i32>)
func.func @main(%x: tensor<300x6xf32>, %i: tensor<i32>, %j: tensor<i32>) -> tensor<2x4xf32> {
  %0 = stablehlo.dynamic_slice %x, %i, %j, sizes = [2, 4] : (tensor<300x6xf32>, tensor<i32>, tensor<i32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}
