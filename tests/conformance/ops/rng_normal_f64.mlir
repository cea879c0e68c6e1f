// stablehlo.rng NORMAL, f64: its values are implementation-defined, so the
// program checks what the spec fixes and the distribution's moments (generate_ops.py).
module @rng_normal_f64 {
  func.func public @main() -> tensor<64x64xf64> {
    %a = stablehlo.constant dense<1.5> : tensor<f64>
    %b = stablehlo.constant dense<2.0> : tensor<f64>
    %shape = stablehlo.constant dense<[64, 64]> : tensor<2xi64>
    %r = stablehlo.rng %a, %b, %shape, distribution = NORMAL : (tensor<f64>, tensor<f64>, tensor<2xi64>) -> tensor<64x64xf64>
    %sum_init = stablehlo.constant dense<0.0> : tensor<f64>
    %sum = stablehlo.reduce(%r init: %sum_init) applies stablehlo.add across dimensions = [0, 1] : (tensor<64x64xf64>, tensor<f64>) -> tensor<f64>
    %n = stablehlo.constant dense<4096.0> : tensor<f64>
    %mean = stablehlo.divide %sum, %n : tensor<f64>
    %mean_b = stablehlo.broadcast_in_dim %mean, dims = [] : (tensor<f64>) -> tensor<64x64xf64>
    %dev = stablehlo.subtract %r, %mean_b : tensor<64x64xf64>
    %sq = stablehlo.multiply %dev, %dev : tensor<64x64xf64>
    %sqsum_init = stablehlo.constant dense<0.0> : tensor<f64>
    %sqsum = stablehlo.reduce(%sq init: %sqsum_init) applies stablehlo.add across dimensions = [0, 1] : (tensor<64x64xf64>, tensor<f64>) -> tensor<f64>
    %var = stablehlo.divide %sqsum, %n : tensor<f64>
    check.expect_almost_eq_const %mean, dense<1.5> : tensor<f64> {tolerance = 0.1562 : f64}
    check.expect_almost_eq_const %var, dense<4.0> : tensor<f64> {tolerance = 0.4419 : f64}
    return %r : tensor<64x64xf64>
  }
}
