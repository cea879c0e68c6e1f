// RUN: kiln-opt %s --pass kiln-lower-sort --split-input-file | FileCheck %s

// stablehlo.sort becomes a bottom-up merge sort: passes of doubling width, merging runs with
// the comparator cloned as 0-d StableHLO.
// CHECK-LABEL: func.func @main
// CHECK-NOT: stablehlo.sort
// CHECK: scf.for
// CHECK: scf.for
// CHECK: stablehlo.compare LT, %{{.*}}, %{{.*}} : (tensor<f32>, tensor<f32>) -> tensor<i1>
// CHECK: scf.yield
func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "stablehlo.sort"(%a) ({
  ^bb0(%x: tensor<f32>, %y: tensor<f32>):
    %c = stablehlo.compare LT, %x, %y : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  }) {dimension = 0 : i64, is_stable = true} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Without the ops this pass lowers, nothing changes.
// CHECK-LABEL: func.func @main
// CHECK-NEXT: stablehlo.negate
func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {
  %0 = stablehlo.negate %a : tensor<2xf32>
  return %0 : tensor<2xf32>
}
