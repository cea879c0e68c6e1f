// RUN: kiln-opt %s --pass kiln-widen-unsigned-slice-starts | FileCheck %s

// ui64 gather indices are bounded by the largest operand dimension with an unsigned minimum
// before upstream reads them as signed (2^64 - 1 would become -1 and clamp to 0, not to the
// last start that fits). Narrower unsigned indices are left alone (zero-extended upstream).
// CHECK-LABEL: func.func @wide
// CHECK: %[[B:.*]] = stablehlo.constant dense<16> : tensor<3x1xui64>
// CHECK: %[[M:.*]] = stablehlo.minimum %arg1, %[[B]] : tensor<3x1xui64>
// CHECK: "stablehlo.gather"(%arg0, %[[M]])
func.func @wide(%x: tensor<16x8xf32>, %i: tensor<3x1xui64>) -> tensor<3x2x8xf32> {
  %r = "stablehlo.gather"(%x, %i) {dimension_numbers = #stablehlo.gather<offset_dims = [1, 2], start_index_map = [0], index_vector_dim = 1>, slice_sizes = array<i64: 2, 8>} : (tensor<16x8xf32>, tensor<3x1xui64>) -> tensor<3x2x8xf32>
  return %r : tensor<3x2x8xf32>
}

// CHECK-LABEL: func.func @narrow
// CHECK-NOT: stablehlo.minimum
func.func @narrow(%x: tensor<16xf32>, %i: tensor<3x1xui32>) -> tensor<3x2xf32> {
  %r = "stablehlo.gather"(%x, %i) {dimension_numbers = #stablehlo.gather<offset_dims = [1], start_index_map = [0], index_vector_dim = 1>, slice_sizes = array<i64: 2>} : (tensor<16xf32>, tensor<3x1xui32>) -> tensor<3x2xf32>
  return %r : tensor<3x2xf32>
}
