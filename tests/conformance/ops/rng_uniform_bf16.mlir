// stablehlo.rng UNIFORM, bf16: its values are implementation-defined, so the
// program checks what the spec fixes and the distribution's moments (generate_ops.py).
module @rng_uniform_bf16 {
  func.func public @main() -> tensor<64x64xbf16> {
    %a = stablehlo.constant dense<-2.0> : tensor<bf16>
    %b = stablehlo.constant dense<3.0> : tensor<bf16>
    %shape = stablehlo.constant dense<[64, 64]> : tensor<2xi64>
    %r = stablehlo.rng %a, %b, %shape, distribution = UNIFORM : (tensor<bf16>, tensor<bf16>, tensor<2xi64>) -> tensor<64x64xbf16>
    %rw = stablehlo.convert %r : (tensor<64x64xbf16>) -> tensor<64x64xf64>
    %sum_init = stablehlo.constant dense<0.0> : tensor<f64>
    %sum = stablehlo.reduce(%rw init: %sum_init) applies stablehlo.add across dimensions = [0, 1] : (tensor<64x64xf64>, tensor<f64>) -> tensor<f64>
    %n = stablehlo.constant dense<4096.0> : tensor<f64>
    %mean = stablehlo.divide %sum, %n : tensor<f64>
    %lo_init = stablehlo.constant dense<0x7FF0000000000000> : tensor<f64>
    %lo = stablehlo.reduce(%rw init: %lo_init) applies stablehlo.minimum across dimensions = [0, 1] : (tensor<64x64xf64>, tensor<f64>) -> tensor<f64>
    %hi_init = stablehlo.constant dense<0xFFF0000000000000> : tensor<f64>
    %hi = stablehlo.reduce(%rw init: %hi_init) applies stablehlo.maximum across dimensions = [0, 1] : (tensor<64x64xf64>, tensor<f64>) -> tensor<f64>
    %aw = stablehlo.constant dense<-2.0> : tensor<f64>
    %bw = stablehlo.constant dense<3.0> : tensor<f64>
    %lo_ok = stablehlo.compare GE, %lo, %aw : (tensor<f64>, tensor<f64>) -> tensor<i1>
    %hi_ok = stablehlo.compare LT, %hi, %bw : (tensor<f64>, tensor<f64>) -> tensor<i1>
    check.expect_eq_const %lo_ok, dense<true> : tensor<i1>
    check.expect_eq_const %hi_ok, dense<true> : tensor<i1>
    check.expect_almost_eq_const %lo, dense<-2.0> : tensor<f64> {tolerance = 0.05 : f64}
    check.expect_almost_eq_const %hi, dense<3.0> : tensor<f64> {tolerance = 0.05 : f64}
    check.expect_almost_eq_const %mean, dense<0.5> : tensor<f64> {tolerance = 0.1128 : f64}
    return %r : tensor<64x64xbf16>
  }
}
