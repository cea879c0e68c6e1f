// RUN: kiln-opt %s --pass kiln-lower-batch-norm | FileCheck %s
// RUN: kiln-opt %s --stage fuse | FileCheck %s --check-prefix=FUSED

// batch_norm_grad, f64, feature_index 0: two per-feature sums of the data (grad_offset =
// sum(g), and sum(g * (x - mean))) and one elementwise pass for grad_operand.
// CHECK-LABEL: func.func @main
// CHECK-COUNT-2: stablehlo.reduce({{.*}}) applies stablehlo.add across dimensions = [1, 2] : (tensor<4x3x2xf64>, tensor<f64>) -> tensor<4xf64>
// CHECK-NOT: stablehlo.reduce
// CHECK: return %{{.*}}, %{{.*}}, %{{.*}} : tensor<4x3x2xf64>, tensor<4xf64>, tensor<4xf64>
// CHECK-NOT: batch_norm
// After fusion the data is read by the two reductions and the one elementwise loop only.
// FUSED-LABEL: func.func @main
// FUSED-COUNT-2: iterator_types = ["parallel", "reduction", "reduction"]
// FUSED-NOT: iterator_types = ["parallel", "reduction", "reduction"]
func.func @main(%x: tensor<4x3x2xf64>, %s: tensor<4xf64>, %m: tensor<4xf64>, %v: tensor<4xf64>, %g: tensor<4x3x2xf64>) -> (tensor<4x3x2xf64>, tensor<4xf64>, tensor<4xf64>) {
  %r:3 = "stablehlo.batch_norm_grad"(%x, %s, %m, %v, %g) {epsilon = 1.0e-3 : f32, feature_index = 0 : i64} : (tensor<4x3x2xf64>, tensor<4xf64>, tensor<4xf64>, tensor<4xf64>, tensor<4x3x2xf64>) -> (tensor<4x3x2xf64>, tensor<4xf64>, tensor<4xf64>)
  return %r#0, %r#1, %r#2 : tensor<4x3x2xf64>, tensor<4xf64>, tensor<4xf64>
}
