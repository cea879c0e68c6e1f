// RUN: kiln-opt %s --pass kiln-guard-run-time-shapes | FileCheck %s

// real_dynamic_slice's start, limit and stride are read before the op: 0 <= start <= limit
// <= dim and stride > 0, or the runtime's failure handler is called with a message naming
// the op, its place and the constraint (a private constant global of bytes).
// CHECK-DAG: memref.global "private" constant @__kiln_guard_message_0 : memref<{{[0-9]+}}xi8>
// CHECK-DAG: func.func private @kiln_runtime_check_failed(i64, i64)
// CHECK-LABEL: func.func @slice
// CHECK: %[[S:.*]] = tensor.extract %arg1[%{{.*}}] : tensor<1xi64>
// CHECK: %[[L:.*]] = tensor.extract %arg2[%{{.*}}] : tensor<1xi64>
// CHECK: %[[T:.*]] = tensor.extract %arg3[%{{.*}}] : tensor<1xi64>
// CHECK-DAG: arith.cmpi slt, %[[S]], %[[ZERO:.*]] : i64
// CHECK-DAG: arith.cmpi sgt, %[[S]], %[[L]] : i64
// CHECK-DAG: arith.cmpi sgt, %[[L]], %c16_i64 : i64
// CHECK-DAG: arith.cmpi sle, %[[T]], %[[ZERO]] : i64
// CHECK: scf.if
// CHECK: memref.get_global @__kiln_guard_message_
// CHECK: memref.extract_aligned_pointer_as_index
// CHECK: func.call @kiln_runtime_check_failed
// CHECK: stablehlo.real_dynamic_slice
func.func @slice(%x: tensor<16xf32>, %s: tensor<1xi64>, %l: tensor<1xi64>, %t: tensor<1xi64>) -> tensor<?xf32> {
  %r = stablehlo.real_dynamic_slice %x, %s, %l, %t : (tensor<16xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?xf32>
  return %r : tensor<?xf32>
}

// A static result size must be what the operands give: ceil((limit - start) / stride), with
// the stride made at least 1 so the division cannot trap before the branch.
// CHECK-LABEL: func.func @static_result
// CHECK: arith.select
// CHECK: arith.ceildivsi
// CHECK: arith.cmpi ne, %{{.*}}, %c4_i64
// CHECK: scf.if
// CHECK: scf.if
// CHECK: stablehlo.real_dynamic_slice
func.func @static_result(%x: tensor<16xf32>, %s: tensor<1xi32>, %l: tensor<1xi32>, %t: tensor<1xi32>) -> tensor<4xf32> {
  %r = stablehlo.real_dynamic_slice %x, %s, %l, %t : (tensor<16xf32>, tensor<1xi32>, tensor<1xi32>, tensor<1xi32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// Unsigned sizes are converted to i64 first (arith has no unsigned types); the byte count of
// a dynamic result is bounded step by step (2^62 bytes / 4 bytes per element).
// CHECK-LABEL: func.func @iota
// CHECK: stablehlo.convert %arg0 : (tensor<1xui32>) -> tensor<1xi64>
// CHECK: tensor.extract
// CHECK: arith.cmpi slt
// CHECK: scf.if
// CHECK: arith.constant 1152921504606846976 : i64
// CHECK: arith.divsi
// CHECK: scf.if
// CHECK: stablehlo.dynamic_iota
func.func @iota(%n: tensor<1xui32>) -> tensor<?xf32> {
  %r = stablehlo.dynamic_iota %n, dim = 0 : (tensor<1xui32>) -> tensor<?xf32>
  return %r : tensor<?xf32>
}

// Each operand dimension is 1 or the output size it is broadcast to.
// CHECK-LABEL: func.func @broadcast
// CHECK: arith.cmpi ne, %{{.*}}, %c1_i64
// CHECK: arith.andi
// CHECK: scf.if
// CHECK: stablehlo.dynamic_broadcast_in_dim
func.func @broadcast(%x: tensor<4xf32>, %n: tensor<2xi64>) -> tensor<?x?xf32> {
  %r = stablehlo.dynamic_broadcast_in_dim %x, %n, dims = [1] : (tensor<4xf32>, tensor<2xi64>) -> tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}

// set_dimension_size: 0 <= size <= the operand's dimension.
// CHECK-LABEL: func.func @set_size
// CHECK: arith.extsi %{{.*}} : i32 to i64
// CHECK: arith.cmpi sgt, %{{.*}}, %c16_i64
// CHECK: scf.if
// CHECK: stablehlo.set_dimension_size
func.func @set_size(%x: tensor<16xf32>, %n: tensor<i32>) -> tensor<?xf32> {
  %r = stablehlo.set_dimension_size %x, %n, dim = 0 : (tensor<16xf32>, tensor<i32>) -> tensor<?xf32>
  return %r : tensor<?xf32>
}
