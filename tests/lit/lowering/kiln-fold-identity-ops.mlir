// RUN: kiln-opt %s --pass kiln-fold-identity-ops --split-input-file | FileCheck %s

// Fuzz finding F4: upstream's stablehlo-legalize-to-linalg crashes on a 0-d identity reshape
// of an unsigned type. Every op below returns its operand unchanged, so it is folded away.
// CHECK-LABEL: func.func @unsigned_scalar_reshape
// CHECK-SAME: (%[[A:.*]]: tensor<ui32>, %[[B:.*]]: tensor<ui8>)
// CHECK-NOT: stablehlo.reshape
// CHECK: return %[[A]], %[[B]]
func.func @unsigned_scalar_reshape(%a: tensor<ui32>, %b: tensor<ui8>) -> (tensor<ui32>, tensor<ui8>) {
  %0 = stablehlo.reshape %a : (tensor<ui32>) -> tensor<ui32>
  %1 = stablehlo.reshape %b : (tensor<ui8>) -> tensor<ui8>
  return %0, %1 : tensor<ui32>, tensor<ui8>
}

// -----

// The other identity forms: same-type convert and bitcast_convert, identity transpose and
// broadcast_in_dim.
// CHECK-LABEL: func.func @identity_forms
// CHECK-SAME: (%[[X:.*]]: tensor<2x3xui16>)
// CHECK-NOT: stablehlo.
// CHECK: return %[[X]], %[[X]], %[[X]], %[[X]], %[[X]]
func.func @identity_forms(%x: tensor<2x3xui16>)
    -> (tensor<2x3xui16>, tensor<2x3xui16>, tensor<2x3xui16>, tensor<2x3xui16>, tensor<2x3xui16>) {
  %0 = stablehlo.reshape %x : (tensor<2x3xui16>) -> tensor<2x3xui16>
  %1 = stablehlo.convert %x : (tensor<2x3xui16>) -> tensor<2x3xui16>
  %2 = stablehlo.bitcast_convert %x : (tensor<2x3xui16>) -> tensor<2x3xui16>
  %3 = stablehlo.transpose %x, dims = [0, 1] : (tensor<2x3xui16>) -> tensor<2x3xui16>
  %4 = stablehlo.broadcast_in_dim %x, dims = [0, 1] : (tensor<2x3xui16>) -> tensor<2x3xui16>
  return %0, %1, %2, %3, %4 : tensor<2x3xui16>, tensor<2x3xui16>, tensor<2x3xui16>, tensor<2x3xui16>, tensor<2x3xui16>
}

// -----

// Kept: ops that change the shape or the type, a transpose and a broadcast_in_dim whose
// types match but whose dimension map swaps the dimensions.
// CHECK-LABEL: func.func @kept
// CHECK: stablehlo.reshape
// CHECK: stablehlo.convert
// CHECK: stablehlo.transpose
// CHECK: stablehlo.broadcast_in_dim
func.func @kept(%a: tensor<ui32>, %s: tensor<2x2xi32>)
    -> (tensor<1xui32>, tensor<i32>, tensor<2x2xi32>, tensor<2x2xi32>) {
  %0 = stablehlo.reshape %a : (tensor<ui32>) -> tensor<1xui32>
  %1 = stablehlo.convert %a : (tensor<ui32>) -> tensor<i32>
  %2 = stablehlo.transpose %s, dims = [1, 0] : (tensor<2x2xi32>) -> tensor<2x2xi32>
  %3 = stablehlo.broadcast_in_dim %s, dims = [1, 0] : (tensor<2x2xi32>) -> tensor<2x2xi32>
  return %0, %1, %2, %3 : tensor<1xui32>, tensor<i32>, tensor<2x2xi32>, tensor<2x2xi32>
}

// -----

// Windows as large as their operand: the start indices clamp to 0, so a dynamic_slice is its
// operand and a dynamic_update_slice its update. Upstream crashes on the 0-d dynamic_slice
// JAX's shard_map emits for a scalar. A smaller window is kept.
// CHECK-LABEL: func.func @whole_windows
// CHECK-SAME: (%[[S:.*]]: tensor<f32>, %[[V:.*]]: tensor<3xf32>, %[[U:.*]]: tensor<3xf32>, %[[I:.*]]: tensor<i32>)
// CHECK: %[[PART:.*]] = stablehlo.dynamic_slice %[[V]], %[[I]], sizes = [2]
// CHECK-NOT: stablehlo.dynamic
// CHECK: return %[[S]], %[[V]], %[[U]], %[[PART]]
func.func @whole_windows(%s: tensor<f32>, %v: tensor<3xf32>, %u: tensor<3xf32>, %i: tensor<i32>)
    -> (tensor<f32>, tensor<3xf32>, tensor<3xf32>, tensor<2xf32>) {
  %0 = stablehlo.dynamic_slice %s, sizes = [] : (tensor<f32>) -> tensor<f32>
  %1 = stablehlo.dynamic_slice %v, %i, sizes = [3] : (tensor<3xf32>, tensor<i32>) -> tensor<3xf32>
  %2 = stablehlo.dynamic_update_slice %v, %u, %i : (tensor<3xf32>, tensor<3xf32>, tensor<i32>) -> tensor<3xf32>
  %3 = stablehlo.dynamic_slice %v, %i, sizes = [2] : (tensor<3xf32>, tensor<i32>) -> tensor<2xf32>
  return %0, %1, %2, %3 : tensor<f32>, tensor<3xf32>, tensor<3xf32>, tensor<2xf32>
}
