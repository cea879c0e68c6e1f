// A two-layer perceptron with its inputs baked in: `kiln run examples/mlp.mlir --print`.
func.func @main() -> tensor<2x3xf32> {
  %x = stablehlo.constant dense<[[1.0, -2.0, 0.5, 3.0], [0.0, 1.0, -1.0, 2.0]]> : tensor<2x4xf32>
  %w1 = stablehlo.constant dense<[[0.5, -0.25, 1.0, 0.0, 0.75], [0.25, 0.5, -0.5, 1.0, 0.0],
                                  [-1.0, 0.0, 0.25, 0.5, 0.5], [0.0, 0.75, 0.0, -0.25, 1.0]]> : tensor<4x5xf32>
  %w2 = stablehlo.constant dense<[[1.0, 0.0, -0.5], [0.5, 0.25, 0.0], [0.0, 1.0, 0.5],
                                  [-0.25, 0.5, 1.0], [0.75, 0.0, 0.25]]> : tensor<5x3xf32>
  %h = stablehlo.dot_general %x, %w1, contracting_dims = [1] x [0] : (tensor<2x4xf32>, tensor<4x5xf32>) -> tensor<2x5xf32>
  %zero = stablehlo.constant dense<0.0> : tensor<2x5xf32>
  %r = stablehlo.maximum %h, %zero : tensor<2x5xf32>
  %o = stablehlo.dot_general %r, %w2, contracting_dims = [1] x [0] : (tensor<2x5xf32>, tensor<5x3xf32>) -> tensor<2x3xf32>
  %t = stablehlo.tanh %o : tensor<2x3xf32>
  return %t : tensor<2x3xf32>
}
