// RUN: kiln-opt %s --split-input-file --pass kiln-update-carried-in-place | FileCheck %s

// x = x * 0.999 + 0.999 in a while loop: the generic writes into the carried tensor, so the
// loop keeps one buffer after bufferization.
// CHECK-LABEL: func.func @main
// CHECK: scf.while
// CHECK: ^bb0(%[[I:.*]]: i32, %[[X:.*]]: tensor<16xf32>):
// CHECK: linalg.generic {{.*}} ins(%[[X]] : tensor<16xf32>) outs(%[[X]] : tensor<16xf32>)
#map = affine_map<(d0) -> (d0)>
func.func @main(%arg0: tensor<16xf32>) -> tensor<16xf32> {
  %cst = arith.constant 9.990000e-01 : f32
  %c1_i32 = arith.constant 1 : i32
  %c100_i32 = arith.constant 100 : i32
  %c0_i32 = arith.constant 0 : i32
  %0:2 = scf.while (%arg1 = %c0_i32, %arg2 = %arg0) : (i32, tensor<16xf32>) -> (i32, tensor<16xf32>) {
    %1 = arith.cmpi slt, %arg1, %c100_i32 : i32
    scf.condition(%1) %arg1, %arg2 : i32, tensor<16xf32>
  } do {
  ^bb0(%arg1: i32, %arg2: tensor<16xf32>):
    %1 = arith.addi %arg1, %c1_i32 : i32
    %2 = tensor.empty() : tensor<16xf32>
    %3 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]} ins(%arg2 : tensor<16xf32>) outs(%2 : tensor<16xf32>) {
    ^bb0(%in: f32, %out: f32):
      %4 = arith.mulf %in, %cst : f32
      %5 = arith.addf %4, %cst : f32
      linalg.yield %5 : f32
    } -> tensor<16xf32>
    scf.yield %1, %3 : i32, tensor<16xf32>
  }
  return %0#1 : tensor<16xf32>
}

// -----

// The carried value is read after the update (returned beside it): the write stays in a
// fresh tensor.
// CHECK-LABEL: func.func @read_after
// CHECK: linalg.generic {{.*}} outs(%{{.*}} : tensor<16xf32>)
// CHECK-NOT: outs(%[[X:arg2]]
#map = affine_map<(d0) -> (d0)>
func.func @read_after(%arg0: tensor<16xf32>) -> tensor<16xf32> {
  %cst = arith.constant 9.990000e-01 : f32
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %0:2 = scf.for %i = %c0 to %c8 step %c1 iter_args(%a = %arg0, %b = %arg0) -> (tensor<16xf32>, tensor<16xf32>) {
    %2 = tensor.empty() : tensor<16xf32>
    %3 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]} ins(%a : tensor<16xf32>) outs(%2 : tensor<16xf32>) {
    ^bb0(%in: f32, %out: f32):
      %4 = arith.mulf %in, %cst : f32
      linalg.yield %4 : f32
    } -> tensor<16xf32>
    scf.yield %3, %a : tensor<16xf32>, tensor<16xf32>
  }
  return %0#1 : tensor<16xf32>
}
