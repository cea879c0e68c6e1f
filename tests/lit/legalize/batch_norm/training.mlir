// RUN: kiln-opt %s --pass kiln-lower-batch-norm | FileCheck %s

// batch_norm_training on bf16, feature_index 2: computed in f32 (converted once in, once
// out); the mean is a sum over dimensions [0, 1] divided by N = 8; the variance is the mean
// of the centered squares (two passes, no E[x^2] - E[x]^2 cancellation).
// CHECK-LABEL: func.func @main
// CHECK: %[[X:.*]] = stablehlo.convert %arg0 : (tensor<2x4x5xbf16>) -> tensor<2x4x5xf32>
// CHECK: %[[S:.*]] = stablehlo.reduce(%[[X]] init: %{{.*}}) applies stablehlo.add across dimensions = [0, 1] : (tensor<2x4x5xf32>, tensor<f32>) -> tensor<5xf32>
// CHECK: %[[N:.*]] = stablehlo.constant dense<8.000000e+00> : tensor<f32>
// CHECK: %[[MEAN:.*]] = stablehlo.divide %[[S]], %{{.*}} : tensor<5xf32>
// CHECK: %[[MB:.*]] = stablehlo.broadcast_in_dim %[[MEAN]], dims = [2]
// CHECK: %[[C:.*]] = stablehlo.subtract %[[X]], %[[MB]]
// CHECK: %[[SQ:.*]] = stablehlo.multiply %[[C]], %[[C]]
// CHECK: stablehlo.reduce(%[[SQ]] init: %{{.*}}) applies stablehlo.add across dimensions = [0, 1]
// CHECK: stablehlo.rsqrt
// CHECK: %[[OUT:.*]] = stablehlo.convert %{{.*}} : (tensor<2x4x5xf32>) -> tensor<2x4x5xbf16>
// CHECK: %[[M16:.*]] = stablehlo.convert %[[MEAN]] : (tensor<5xf32>) -> tensor<5xbf16>
// CHECK: return %[[OUT]], %[[M16]], %{{.*}} : tensor<2x4x5xbf16>, tensor<5xbf16>, tensor<5xbf16>
// CHECK-NOT: batch_norm
func.func @main(%x: tensor<2x4x5xbf16>, %s: tensor<5xbf16>, %o: tensor<5xbf16>) -> (tensor<2x4x5xbf16>, tensor<5xbf16>, tensor<5xbf16>) {
  %r:3 = "stablehlo.batch_norm_training"(%x, %s, %o) {epsilon = 1.0e-5 : f32, feature_index = 2 : i64} : (tensor<2x4x5xbf16>, tensor<5xbf16>, tensor<5xbf16>) -> (tensor<2x4x5xbf16>, tensor<5xbf16>, tensor<5xbf16>)
  return %r#0, %r#1, %r#2 : tensor<2x4x5xbf16>, tensor<5xbf16>, tensor<5xbf16>
}
