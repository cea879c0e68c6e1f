// RUN: kiln-opt %s --pass kiln-fold-empty-values --split-input-file | FileCheck %s

// An empty slice that starts at the end of its dimension (valid: start <= dim) becomes a
// zero-element constant; upstream would build a tensor.extract_slice at offset 4 of a size-4
// dimension, which the tensor dialect rejects.
// CHECK-LABEL: func.func @slice_at_end
// CHECK-NOT: stablehlo.slice
// CHECK: %[[E:.*]] = stablehlo.constant dense<> : tensor<1x0xf32>
// CHECK: return %[[E]]
func.func @slice_at_end(%x: tensor<2x4xf32>) -> tensor<1x0xf32> {
  %s = stablehlo.slice %x [1:2, 4:4] : (tensor<2x4xf32>) -> tensor<1x0xf32>
  return %s : tensor<1x0xf32>
}

// -----

// dynamic_slice, real_dynamic_slice, gather and pad with zero-element results: the same.
// Their operands stay (canonicalize drops the dead ones).
// CHECK-LABEL: func.func @data_movement
// CHECK-NOT: stablehlo.dynamic_slice
// CHECK-NOT: stablehlo.real_dynamic_slice
// CHECK-NOT: stablehlo.gather
// CHECK-NOT: stablehlo.pad
// CHECK-DAG: %[[D:.*]] = stablehlo.constant dense<> : tensor<1x0xf32>
// CHECK-DAG: %[[R:.*]] = stablehlo.constant dense<> : tensor<0x4xf32>
// CHECK-DAG: %[[G:.*]] = stablehlo.constant dense<> : tensor<3x0xf32>
// CHECK-DAG: %[[P:.*]] = stablehlo.constant dense<> : tensor<2x0xf32>
// CHECK: return %[[D]], %[[R]], %[[G]], %[[P]]
func.func @data_movement(%x: tensor<2x4xf32>, %i: tensor<i32>, %starts: tensor<2xi64>,
                         %limits: tensor<2xi64>, %idx: tensor<3x1xi32>)
    -> (tensor<1x0xf32>, tensor<0x4xf32>, tensor<3x0xf32>, tensor<2x0xf32>) {
  %d = stablehlo.dynamic_slice %x, %i, %i, sizes = [1, 0] : (tensor<2x4xf32>, tensor<i32>, tensor<i32>) -> tensor<1x0xf32>
  %one = stablehlo.constant dense<1> : tensor<2xi64>
  %r = stablehlo.real_dynamic_slice %x, %starts, %limits, %one : (tensor<2x4xf32>, tensor<2xi64>, tensor<2xi64>, tensor<2xi64>) -> tensor<0x4xf32>
  %g = "stablehlo.gather"(%x, %idx) <{dimension_numbers = #stablehlo.gather<offset_dims = [1], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>, indices_are_sorted = false, slice_sizes = array<i64: 1, 0>}> : (tensor<2x4xf32>, tensor<3x1xi32>) -> tensor<3x0xf32>
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %p = stablehlo.pad %x, %zero, low = [0, -4], high = [0, 0], interior = [0, 0] : (tensor<2x4xf32>, tensor<f32>) -> tensor<2x0xf32>
  return %d, %r, %g, %p : tensor<1x0xf32>, tensor<0x4xf32>, tensor<3x0xf32>, tensor<2x0xf32>
}

// -----

// Left alone: slices with elements and results whose size is known only at run time. A pure
// op with an empty result (the negate) is a constant too (fuzz, seed 2028: upstream made an
// empty reshape a tensor.empty, a consumer wrote into it in place, and the entry returned one
// buffer twice).
// CHECK-LABEL: func.func @kept
// CHECK: stablehlo.slice
// CHECK: stablehlo.real_dynamic_slice
// CHECK-NOT: stablehlo.negate
// CHECK: stablehlo.constant dense<> : tensor<2x0xf32>
func.func @kept(%x: tensor<2x4xf32>, %starts: tensor<2xi64>, %limits: tensor<2xi64>,
                %e: tensor<2x0xf32>) -> (tensor<1x1xf32>, tensor<?x?xf32>, tensor<2x0xf32>) {
  %s = stablehlo.slice %x [1:2, 3:4] : (tensor<2x4xf32>) -> tensor<1x1xf32>
  %one = stablehlo.constant dense<1> : tensor<2xi64>
  %r = stablehlo.real_dynamic_slice %x, %starts, %limits, %one : (tensor<2x4xf32>, tensor<2xi64>, tensor<2xi64>, tensor<2xi64>) -> tensor<?x?xf32>
  %n = stablehlo.negate %e : tensor<2x0xf32>
  return %s, %r, %n : tensor<1x1xf32>, tensor<?x?xf32>, tensor<2x0xf32>
}

// -----

// Fuzz finding F7: an empty dynamic_slice used by a negate and by another dynamic_slice, both
// returned. Folded to a tensor.empty, bufferization let the negate write in place into the
// empty value's buffer and the entry returned that buffer twice, which crashed
// buffer-results-to-out-params. Constants are read-only, so each result keeps its own value.
// CHECK-LABEL: func.func @used_twice
// CHECK-NOT: tensor.empty
// CHECK-NOT: stablehlo.negate
// CHECK: return %[[A:.*]], %[[B:[^ ]*]] : tensor<0x0xf32>, tensor<0x0xf32>
func.func @used_twice(%x: tensor<2x1xf32>, %a: tensor<i8>, %c: tensor<ui32>)
    -> (tensor<0x0xf32>, tensor<0x0xf32>) {
  %v2 = stablehlo.dynamic_slice %x, %a, %a, sizes = [0, 0] : (tensor<2x1xf32>, tensor<i8>, tensor<i8>) -> tensor<0x0xf32>
  %v3 = stablehlo.negate %v2 : tensor<0x0xf32>
  %v4 = stablehlo.dynamic_slice %v2, %c, %c, sizes = [0, 0] : (tensor<0x0xf32>, tensor<ui32>, tensor<ui32>) -> tensor<0x0xf32>
  return %v4, %v3 : tensor<0x0xf32>, tensor<0x0xf32>
}

// -----

// Element types beyond f32 take the same zero-element constant.
// CHECK-LABEL: func.func @element_types
// CHECK-DAG: stablehlo.constant dense<> : tensor<0xui8>
// CHECK-DAG: stablehlo.constant dense<> : tensor<2x0xi1>
// CHECK-DAG: stablehlo.constant dense<> : tensor<0x2xcomplex<f32>>
// CHECK-DAG: stablehlo.constant dense<> : tensor<0xbf16>
func.func @element_types(%u: tensor<4xui8>, %b: tensor<2x2xi1>, %c: tensor<2x2xcomplex<f32>>,
                         %h: tensor<3xbf16>)
    -> (tensor<0xui8>, tensor<2x0xi1>, tensor<0x2xcomplex<f32>>, tensor<0xbf16>) {
  %0 = stablehlo.slice %u [4:4] : (tensor<4xui8>) -> tensor<0xui8>
  %1 = stablehlo.slice %b [0:2, 2:2] : (tensor<2x2xi1>) -> tensor<2x0xi1>
  %2 = stablehlo.slice %c [2:2, 0:2] : (tensor<2x2xcomplex<f32>>) -> tensor<0x2xcomplex<f32>>
  %3 = stablehlo.slice %h [1:1] : (tensor<3xbf16>) -> tensor<0xbf16>
  return %0, %1, %2, %3 : tensor<0xui8>, tensor<2x0xi1>, tensor<0x2xcomplex<f32>>, tensor<0xbf16>
}

// -----

// pad and reduce_window over an empty operand read only padding: the pad becomes its padding
// value broadcast, the reduce_window the same window over its init broadcast to the padded,
// dilated base (5x2 here) with no padding or dilation left.
// CHECK-LABEL: func.func @only_padding
// CHECK-NOT: stablehlo.pad
// CHECK: %[[P:.*]] = stablehlo.broadcast_in_dim %arg1, dims = [] : (tensor<f32>) -> tensor<2x2xf32>
// CHECK: %[[B:.*]] = stablehlo.broadcast_in_dim %arg3, dims = [] : (tensor<i32>) -> tensor<5x2xi32>
// CHECK: "stablehlo.reduce_window"(%[[B]], %arg3)
// CHECK-NOT: padding
// CHECK-SAME: window_dimensions = array<i64: 2, 2>
// CHECK: return %[[P]]
func.func @only_padding(%x: tensor<1x0xf32>, %p: tensor<f32>, %y: tensor<3x0xi32>, %i: tensor<i32>)
    -> (tensor<2x2xf32>, tensor<4x1xi32>) {
  %r = "stablehlo.pad"(%x, %p) {edge_padding_low = array<i64: 0, 2>,
      edge_padding_high = array<i64: 1, 0>, interior_padding = array<i64: 1, 2>}
      : (tensor<1x0xf32>, tensor<f32>) -> tensor<2x2xf32>
  %w = "stablehlo.reduce_window"(%y, %i) ({
  ^bb0(%a: tensor<i32>, %b: tensor<i32>):
    %s = stablehlo.add %a, %b : tensor<i32>
    stablehlo.return %s : tensor<i32>
  }) {window_dimensions = array<i64: 2, 2>, base_dilations = array<i64: 2, 2>,
       padding = dense<[[0, 0], [1, 1]]> : tensor<2x2xi64>}
      : (tensor<3x0xi32>, tensor<i32>) -> tensor<4x1xi32>
  return %r, %w : tensor<2x2xf32>, tensor<4x1xi32>
}
