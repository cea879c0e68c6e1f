// RUN: kiln-opt %s --pass kiln-lower-batch-norm | FileCheck %s

// batch_norm_inference: the per-feature factor scale * rsqrt(variance + epsilon) is computed
// once on the C-vector; each element gets (x - mean) * factor + offset, the vectors broadcast
// along feature_index (here 1).
// CHECK-LABEL: func.func @main
// CHECK: %[[EPS:.*]] = stablehlo.constant dense<1.000000e-03> : tensor<f32>
// CHECK: %[[EPSV:.*]] = stablehlo.broadcast_in_dim %[[EPS]], dims = [] : (tensor<f32>) -> tensor<3xf32>
// CHECK: %[[VE:.*]] = stablehlo.add %arg4, %[[EPSV]] : tensor<3xf32>
// CHECK: %[[R:.*]] = stablehlo.rsqrt %[[VE]] : tensor<3xf32>
// CHECK: %[[F:.*]] = stablehlo.multiply %arg1, %[[R]] : tensor<3xf32>
// CHECK: %[[M:.*]] = stablehlo.broadcast_in_dim %arg3, dims = [1] : (tensor<3xf32>) -> tensor<2x3x4xf32>
// CHECK: %[[C:.*]] = stablehlo.subtract %arg0, %[[M]] : tensor<2x3x4xf32>
// CHECK: %[[FB:.*]] = stablehlo.broadcast_in_dim %[[F]], dims = [1]
// CHECK: %[[Y:.*]] = stablehlo.multiply %[[C]], %[[FB]] : tensor<2x3x4xf32>
// CHECK: %[[OB:.*]] = stablehlo.broadcast_in_dim %arg2, dims = [1]
// CHECK: %[[OUT:.*]] = stablehlo.add %[[Y]], %[[OB]] : tensor<2x3x4xf32>
// CHECK: return %[[OUT]]
// CHECK-NOT: batch_norm
func.func @main(%x: tensor<2x3x4xf32>, %s: tensor<3xf32>, %o: tensor<3xf32>, %m: tensor<3xf32>, %v: tensor<3xf32>) -> tensor<2x3x4xf32> {
  %r = "stablehlo.batch_norm_inference"(%x, %s, %o, %m, %v) {epsilon = 1.0e-3 : f32, feature_index = 1 : i64} : (tensor<2x3x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x3x4xf32>
  return %r : tensor<2x3x4xf32>
}
