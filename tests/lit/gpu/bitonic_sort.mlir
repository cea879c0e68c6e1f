// RUN: kiln-opt %s --pass kiln-gpu-bitonic-sort --split-input-file | FileCheck %s

// A sort of rows of 3: the network for 4 (partners i^1, i^3, i^1), one parallel generic a
// step over every element. The first step computes the original positions from the index
// (ties are broken on them); a partner at or past 3 keeps the element (no padding).
// CHECK-LABEL: func.func @rows_of_three
// CHECK: %[[S1:.*]]:2 = linalg.generic {{.*}} iterator_types = ["parallel", "parallel"]} ins(%arg0 : tensor<2x3xf32>) outs({{.*}} : tensor<2x3xf32>, tensor<2x3xi32>) attrs = {kiln.scalarize}
// CHECK:   %[[I:.*]] = linalg.index 1 : index
// CHECK:   %[[P:.*]] = arith.xori %[[I]], %c1 : index
// CHECK:   %[[IN:.*]] = arith.cmpi ult, %[[P]], %c3 : index
// CHECK:   %[[SAFE:.*]] = arith.select %[[IN]], %[[P]], %[[I]] : index
// CHECK:   tensor.extract %arg0[%{{.*}}, %[[SAFE]]] : tensor<2x3xf32>
// CHECK:   arith.index_cast %[[I]] : index to i32
// The op's own comparator, both ways (upper against lower, then lower against upper):
// CHECK:   stablehlo.compare LT, {{.*}} TOTALORDER
// CHECK:   stablehlo.compare LT, {{.*}} TOTALORDER
// CHECK:   arith.cmpi slt, %{{.*}}, %{{.*}} : i32
// CHECK:   linalg.yield %{{.*}}, %{{.*}} : f32, i32
// CHECK: %[[S2:.*]]:2 = linalg.generic {{.*}} ins(%[[S1]]#0, %[[S1]]#1 : tensor<2x3xf32>, tensor<2x3xi32>)
// CHECK:   arith.xori %{{.*}}, %c3 : index
// CHECK:   tensor.extract %[[S1]]#0
// CHECK: %[[S3:.*]]:2 = linalg.generic {{.*}} ins(%[[S2]]#0, %[[S2]]#1 : tensor<2x3xf32>, tensor<2x3xi32>)
// CHECK:   arith.xori %{{.*}}, %c1 : index
// CHECK-NOT: linalg.generic
// CHECK-NOT: stablehlo.sort
// CHECK: return %[[S3]]#0 : tensor<2x3xf32>
func.func @rows_of_three(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = "stablehlo.sort"(%x) <{dimension = 1 : i64}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.compare LT, %a, %b, TOTALORDER : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  }) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// Two operands sorted together along dimension 0 (argsort's form): both travel with the
// positions, the comparator sees (lhs, rhs) pairs of each.
// CHECK-LABEL: func.func @key_and_payload
// CHECK: linalg.generic {{.*}} ins(%arg0, %arg1 : tensor<2x5xi32>, tensor<2x5xi32>) outs({{.*}} : tensor<2x5xi32>, tensor<2x5xi32>, tensor<2x5xi32>)
// CHECK:   %[[I:.*]] = linalg.index 0 : index
// CHECK:   arith.xori %[[I]], %c1 : index
// CHECK:   arith.cmpi ult, %{{.*}}, %c2 : index
// CHECK:   stablehlo.compare GT
// CHECK:   linalg.yield %{{.*}}, %{{.*}}, %{{.*}} : i32, i32, i32
// CHECK-NOT: linalg.generic
// CHECK: return
func.func @key_and_payload(%k: tensor<2x5xi32>, %v: tensor<2x5xi32>) -> (tensor<2x5xi32>, tensor<2x5xi32>) {
  %0:2 = "stablehlo.sort"(%k, %v) <{dimension = 0 : i64, is_stable = true}> ({
  ^bb0(%a: tensor<i32>, %b: tensor<i32>, %p: tensor<i32>, %q: tensor<i32>):
    %c = stablehlo.compare GT, %a, %b, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  }) : (tensor<2x5xi32>, tensor<2x5xi32>) -> (tensor<2x5xi32>, tensor<2x5xi32>)
  return %0#0, %0#1 : tensor<2x5xi32>, tensor<2x5xi32>
}

// -----

// Rows of one element need no network: the op is left to the shared lowering.
// CHECK-LABEL: func.func @single
// CHECK-NOT: linalg.generic
// CHECK: stablehlo.sort
func.func @single(%x: tensor<4x1xf32>) -> tensor<4x1xf32> {
  %0 = "stablehlo.sort"(%x) <{dimension = 1 : i64}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.compare LT, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  }) : (tensor<4x1xf32>) -> tensor<4x1xf32>
  return %0 : tensor<4x1xf32>
}
