// RUN: kiln-opt %s --pass kiln-guard-run-time-shapes | FileCheck %s

// Sizes an op requires to be equal, where one of them is dynamic, are compared before it
// runs; a mismatch calls the runtime's failure handler (message: op, place, dimensions).
// CHECK-DAG: func.func private @kiln_runtime_check_failed(i64, i64)

// Elementwise: two dynamic operands compared with each other; the dynamic result is computed
// from them, the static dimension needs nothing.
// CHECK-LABEL: func.func @add
// CHECK: %[[A:.*]] = tensor.dim %arg0, %c0
// CHECK: %[[AI:.*]] = arith.index_cast %[[A]]
// CHECK: %[[B:.*]] = tensor.dim %arg1, %c0
// CHECK: %[[BI:.*]] = arith.index_cast %[[B]]
// CHECK: arith.cmpi ne, %[[BI]], %[[AI]] : i64
// CHECK-NOT: tensor.dim
// CHECK: scf.if
// CHECK: func.call @kiln_runtime_check_failed
// CHECK: stablehlo.add
func.func @add(%x: tensor<?x4xf32>, %y: tensor<?x4xf32>) -> tensor<?x4xf32> {
  %r = stablehlo.add %x, %y : tensor<?x4xf32>
  return %r : tensor<?x4xf32>
}

// A dynamic operand of an op with a static result: compared with the static size.
// CHECK-LABEL: func.func @static_result
// CHECK: tensor.dim %arg0
// CHECK: arith.cmpi ne, %{{.*}}, %c8_i64
// CHECK: scf.if
// CHECK: stablehlo.multiply
func.func @static_result(%x: tensor<?xf32>, %y: tensor<8xf32>) -> tensor<8xf32> {
  %r = stablehlo.multiply %x, %y : (tensor<?xf32>, tensor<8xf32>) -> tensor<8xf32>
  return %r : tensor<8xf32>
}

// select's scalar predicate is broadcast: only the two branches are compared.
// CHECK-LABEL: func.func @select
// CHECK-NOT: tensor.dim %arg0
// CHECK: tensor.dim %arg1
// CHECK: tensor.dim %arg2
// CHECK: scf.if
// CHECK: stablehlo.select
func.func @select(%p: tensor<i1>, %x: tensor<?xf32>, %y: tensor<?xf32>) -> tensor<?xf32> {
  %r = stablehlo.select %p, %x, %y : (tensor<i1>, tensor<?xf32>, tensor<?xf32>) -> tensor<?xf32>
  return %r : tensor<?xf32>
}

// concatenate: the other dimensions are equal, and the axis adds up to a static result.
// CHECK-LABEL: func.func @concat
// CHECK: tensor.dim %arg1, %c1
// CHECK: arith.cmpi ne, %{{.*}}, %c3_i64
// CHECK: scf.if
// CHECK: tensor.dim %arg0, %c0
// CHECK: arith.addi %{{.*}}, %c2_i64
// CHECK: arith.cmpi ne, %{{.*}}, %c5_i64
// CHECK: scf.if
// CHECK: stablehlo.concatenate
func.func @concat(%x: tensor<?x3xf32>, %y: tensor<2x?xf32>) -> tensor<5x3xf32> {
  %r = stablehlo.concatenate %x, %y, dim = 0 : (tensor<?x3xf32>, tensor<2x?xf32>) -> tensor<5x3xf32>
  return %r : tensor<5x3xf32>
}

// dot_general: batch and contracting dimensions pair lhs with rhs (here the dynamic batch
// dimension of rhs with lhs's static 2); lhs's dynamic free dimension sizes the result.
// CHECK-LABEL: func.func @dot
// CHECK: tensor.dim %arg1, %c0
// CHECK: arith.cmpi ne, %{{.*}}, %c2_i64
// CHECK-NOT: tensor.dim
// CHECK: scf.if
// CHECK: stablehlo.dot_general
func.func @dot(%x: tensor<2x?x3xf32>, %y: tensor<?x3x5xf32>) -> tensor<2x?x5xf32> {
  %r = stablehlo.dot_general %x, %y, batching_dims = [0] x [0], contracting_dims = [2] x [1] : (tensor<2x?x3xf32>, tensor<?x3x5xf32>) -> tensor<2x?x5xf32>
  return %r : tensor<2x?x5xf32>
}

// transpose: a static result dimension fixes the operand dimension it comes from.
// CHECK-LABEL: func.func @transpose
// CHECK: tensor.dim %arg0, %c1
// CHECK: arith.cmpi ne, %{{.*}}, %c7_i64
// CHECK: scf.if
// CHECK: stablehlo.transpose
func.func @transpose(%x: tensor<4x?xf32>) -> tensor<7x4xf32> {
  %r = stablehlo.transpose %x, dims = [1, 0] : (tensor<4x?xf32>) -> tensor<7x4xf32>
  return %r : tensor<7x4xf32>
}

// slice: a static limit must not pass a dynamic operand size; static sizes need nothing.
// CHECK-LABEL: func.func @slice
// CHECK-NOT: tensor.dim %arg0, %c0
// CHECK: tensor.dim %arg0, %c1
// CHECK: arith.cmpi sgt, %c6_i64, %{{.*}} : i64
// CHECK: scf.if
// CHECK: stablehlo.slice
func.func @slice(%x: tensor<4x?xf32>) -> tensor<2x6xf32> {
  %r = stablehlo.slice %x [1:3, 0:6] : (tensor<4x?xf32>) -> tensor<2x6xf32>
  return %r : tensor<2x6xf32>
}

// Static shapes: checked by the verifier, no run-time code.
// CHECK-LABEL: func.func @static
// CHECK-NEXT: stablehlo.add
// CHECK-NEXT: return
func.func @static(%x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<4xf32> {
  %r = stablehlo.add %x, %y : tensor<4xf32>
  return %r : tensor<4xf32>
}
