// RUN: kiln-opt %s --pass kiln-canonicalize-convolutions --split-input-file | FileCheck %s

// NCHW/OIHW (XLA's default layout): transposes into NHWC/HWIO around one canonical
// convolution, whose padding upstream applies once; the result is transposed back.
// CHECK-LABEL: func.func @nchw
// CHECK: %[[X:.*]] = stablehlo.transpose %arg0, dims = [0, 2, 3, 1] : {{.*}} -> tensor<2x9x9x16xf32>
// CHECK: %[[W:.*]] = stablehlo.transpose %arg1, dims = [2, 3, 1, 0] : {{.*}} -> tensor<3x3x16x32xf32>
// CHECK: %[[Y:.*]] = stablehlo.convolution(%[[X]], %[[W]]) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f], window = {stride = [1, 1], pad = {{\[\[}}1, 1], [1, 1]], lhs_dilate = [1, 1], rhs_dilate = [1, 1]}
// CHECK-SAME: -> tensor<2x9x9x32xf32>
// CHECK: %[[R:.*]] = stablehlo.transpose %[[Y]], dims = [0, 3, 1, 2] : {{.*}} -> tensor<2x32x9x9xf32>
// CHECK: return %[[R]]
func.func @nchw(%x: tensor<2x16x9x9xf32>, %w: tensor<32x16x3x3xf32>) -> tensor<2x32x9x9xf32> {
  %0 = stablehlo.convolution(%x, %w) dim_numbers = [b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1], window = {stride = [1, 1], pad = [[1, 1], [1, 1]]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<2x16x9x9xf32>, tensor<32x16x3x3xf32>) -> tensor<2x32x9x9xf32>
  return %0 : tensor<2x32x9x9xf32>
}

// -----

// JAX's input gradient of a stride-2 3x3 convolution (lhs_dilation 2): no zero-interleaved
// input. Each of the 2x2 output residue classes is a convolution of the undilated input with
// the kernel taps that meet real elements (2x2, 2x1, 1x2, 1x1 of the 3x3), interleaved back.
// The input is padded once; each class reads a slice of it.
// CHECK-LABEL: func.func @grad_input
// CHECK-NOT: lhs_dilate = [2, 2]
// CHECK: %[[W:.*]] = stablehlo.transpose %arg1, dims = [0, 1, 3, 2]
// CHECK: %[[X:.*]] = stablehlo.pad %arg0, %{{.*}}, low = [0, 1, 1, 0], high = [0, 0, 0, 0]
// CHECK: %[[W00:.*]] = stablehlo.slice %[[W]] [0:3:2, 0:3:2, 0:8, 0:16]
// CHECK: stablehlo.convolution(%[[X]], %[[W00]]) {{.*}} pad = {{\[\[}}0, 0], [0, 0]]{{.*}} -> tensor<2x4x4x16xf32>
// CHECK: %[[X01:.*]] = stablehlo.slice %[[X]] [0:2, 0:5, 1:5, 0:8]
// CHECK: %[[W01:.*]] = stablehlo.slice %[[W]] [0:3:2, 1:2, 0:8, 0:16]
// CHECK: stablehlo.convolution(%[[X01]], %[[W01]]) {{.*}} -> tensor<2x4x4x16xf32>
// CHECK: stablehlo.concatenate {{.*}}, dim = 3 : {{.*}} -> tensor<2x4x4x2x16xf32>
// CHECK: stablehlo.slice %[[W]] [1:2, 0:3:2, 0:8, 0:16]
// CHECK: stablehlo.slice %[[W]] [1:2, 1:2, 0:8, 0:16]
// CHECK: stablehlo.concatenate {{.*}}, dim = 2 : {{.*}} -> tensor<2x4x2x8x16xf32>
// CHECK: %[[R:.*]] = stablehlo.reshape {{.*}} -> tensor<2x8x8x16xf32>
// CHECK: return %[[R]]
func.func @grad_input(%dy: tensor<2x4x4x8xf32>, %w: tensor<3x3x16x8xf32>) -> tensor<2x8x8x16xf32> {
  %0 = stablehlo.convolution(%dy, %w) dim_numbers = [b, 0, 1, f]x[0, 1, o, i]->[b, 0, 1, f], window = {stride = [1, 1], pad = [[2, 1], [2, 1]], lhs_dilate = [2, 2]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<2x4x4x8xf32>, tensor<3x3x16x8xf32>) -> tensor<2x8x8x16xf32>
  return %0 : tensor<2x8x8x16xf32>
}

// -----

// Feature groups: one convolution per group, joined along the output features.
// CHECK-LABEL: func.func @groups
// CHECK: %[[X0:.*]] = stablehlo.slice %arg0 [0:2, 0:6, 0:6, 0:16]
// CHECK: %[[X1:.*]] = stablehlo.slice %arg0 [0:2, 0:6, 0:6, 16:32]
// CHECK: %[[W0:.*]] = stablehlo.slice %arg1 [0:3, 0:3, 0:16, 0:3]
// CHECK: %[[W1:.*]] = stablehlo.slice %arg1 [0:3, 0:3, 0:16, 3:6]
// CHECK: %[[Y0:.*]] = stablehlo.convolution(%[[X0]], %[[W0]]) {{.*}} feature_group_count = 1
// CHECK: %[[Y1:.*]] = stablehlo.convolution(%[[X1]], %[[W1]]) {{.*}} feature_group_count = 1
// CHECK: stablehlo.concatenate %[[Y0]], %[[Y1]], dim = 3 : {{.*}} -> tensor<2x4x4x6xf32>
func.func @groups(%x: tensor<2x6x6x32xf32>, %w: tensor<3x3x16x6xf32>) -> tensor<2x4x4x6xf32> {
  %0 = stablehlo.convolution(%x, %w) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f], window = {stride = [1, 1]} {batch_group_count = 1 : i64, feature_group_count = 2 : i64} : (tensor<2x6x6x32xf32>, tensor<3x3x16x6xf32>) -> tensor<2x4x4x6xf32>
  return %0 : tensor<2x4x4x6xf32>
}

// -----

// Groups of fewer than MIN_GROUP_CHANNELS input channels stay one convolution: per-group
// products too small for BLAS were slower than upstream's grouped loop nest (RegNet's
// 55 groups of 8 channels: 18 ms against 7 ms a layer) and made one loop nest a group.
// CHECK-LABEL: func.func @narrow_groups
// CHECK-NOT: stablehlo.slice
// CHECK: stablehlo.convolution(%arg0, %arg1) {{.*}} feature_group_count = 4
// CHECK-NOT: stablehlo.concatenate
func.func @narrow_groups(%x: tensor<2x6x6x32xf32>, %w: tensor<3x3x8x8xf32>) -> tensor<2x4x4x8xf32> {
  %0 = stablehlo.convolution(%x, %w) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f], window = {stride = [1, 1]} {batch_group_count = 1 : i64, feature_group_count = 4 : i64} : (tensor<2x6x6x32xf32>, tensor<3x3x8x8xf32>) -> tensor<2x4x4x8xf32>
  return %0 : tensor<2x4x4x8xf32>
}

// -----

// A 1-D convolution gets a unit height.
// CHECK-LABEL: func.func @conv1d
// CHECK: stablehlo.reshape {{.*}} -> tensor<2x1x10x8xf32>
// CHECK: stablehlo.reshape {{.*}} -> tensor<1x3x8x4xf32>
// CHECK: stablehlo.convolution{{.*}} window = {stride = [1, 2]{{.*}} -> tensor<2x1x5x4xf32>
// CHECK: stablehlo.reshape {{.*}} -> tensor<2x5x4xf32>
func.func @conv1d(%x: tensor<2x10x8xf32>, %w: tensor<3x8x4xf32>) -> tensor<2x5x4xf32> {
  %0 = stablehlo.convolution(%x, %w) dim_numbers = [b, 0, f]x[0, i, o]->[b, 0, f], window = {stride = [2], pad = [[1, 1]]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<2x10x8xf32>, tensor<3x8x4xf32>) -> tensor<2x5x4xf32>
  return %0 : tensor<2x5x4xf32>
}

// -----

// Already canonical (upstream makes linalg.conv_2d_nhwc_hwcf of it), and integer
// convolutions (no BLAS for them): left as they are.
// CHECK-LABEL: func.func @canonical
// CHECK-NEXT: stablehlo.convolution(%arg0, %arg1) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f], window = {stride = [1, 1]}
// CHECK-NEXT: return
func.func @canonical(%x: tensor<2x6x6x8xf32>, %w: tensor<3x3x8x6xf32>) -> tensor<2x4x4x6xf32> {
  %0 = stablehlo.convolution(%x, %w) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f], window = {stride = [1, 1]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<2x6x6x8xf32>, tensor<3x3x8x6xf32>) -> tensor<2x4x4x6xf32>
  return %0 : tensor<2x4x4x6xf32>
}

// -----

// CHECK-LABEL: func.func @integer
// CHECK-NEXT: stablehlo.convolution(%arg0, %arg1) dim_numbers = [b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1]
// CHECK-NEXT: return
func.func @integer(%x: tensor<2x8x6x6xi32>, %w: tensor<6x8x3x3xi32>) -> tensor<2x6x4x4xi32> {
  %0 = stablehlo.convolution(%x, %w) dim_numbers = [b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1], window = {stride = [1, 1]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<2x8x6x6xi32>, tensor<6x8x3x3xi32>) -> tensor<2x6x4x4xi32>
  return %0 : tensor<2x6x4x4xi32>
}
