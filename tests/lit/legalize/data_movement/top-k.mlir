// RUN: kiln-opt %s --pass kiln-lower-top-k --split-input-file | FileCheck %s

// A sort read only through leading slices [0, 3) becomes a selection: a loop over the rows,
// a loop over chunks of 8 positions (a branch-free test against the buffer's last element),
// a loop over positions; the 3-slot buffer is carried in scalars (count, 3 x (f32, i32)).
// The iota operand is not read: its value at position i is index_cast(i).
// CHECK-LABEL: func.func @top3
// CHECK-NOT: stablehlo.sort
// CHECK: scf.for {{.*}} -> (tensor<4x3xf32>, tensor<4x3xi32>)
// CHECK: scf.for {{.*}} -> (index, f32, i32, f32, i32, f32, i32)
// CHECK: scf.for {{.*}} -> (i1)
// CHECK: stablehlo.compare GT
// CHECK: scf.if
// CHECK: scf.for {{.*}} -> (index, f32, i32, f32, i32, f32, i32)
// CHECK: arith.index_cast
// CHECK-COUNT-3: tensor.insert {{.*}} : tensor<4x3xf32>
// CHECK-NOT: stablehlo.slice
// CHECK: return
func.func @top3(%x: tensor<4x20xf32>) -> (tensor<4x3xf32>, tensor<4x3xi32>) {
  %iota = stablehlo.iota dim = 1 : tensor<4x20xi32>
  %0:2 = "stablehlo.sort"(%x, %iota) ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>, %c: tensor<i32>, %d: tensor<i32>):
    %gt = stablehlo.compare GT, %a, %b, TOTALORDER : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %gt : tensor<i1>
  }) {dimension = 1 : i64, is_stable = true} : (tensor<4x20xf32>, tensor<4x20xi32>) -> (tensor<4x20xf32>, tensor<4x20xi32>)
  %1 = stablehlo.slice %0#0 [0:4, 0:3] : (tensor<4x20xf32>) -> tensor<4x3xf32>
  %2 = stablehlo.slice %0#1 [0:4, 0:3] : (tensor<4x20xi32>) -> tensor<4x3xi32>
  return %1, %2 : tensor<4x3xf32>, tensor<4x3xi32>
}

// -----

// A sorted result read whole keeps the sort.
// CHECK-LABEL: func.func @whole
// CHECK: stablehlo.sort
func.func @whole(%x: tensor<20xf32>) -> (tensor<3xf32>, tensor<20xf32>) {
  %0 = "stablehlo.sort"(%x) ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %gt = stablehlo.compare GT, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %gt : tensor<i1>
  }) {dimension = 0 : i64, is_stable = true} : (tensor<20xf32>) -> tensor<20xf32>
  %1 = stablehlo.slice %0 [0:3] : (tensor<20xf32>) -> tensor<3xf32>
  return %1, %0 : tensor<3xf32>, tensor<20xf32>
}
