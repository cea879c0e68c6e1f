// RUN: kiln-opt %s --stage codegen | FileCheck %s

// An NHWC x HWIO convolution: loops over (n, oh, kh, kw) around a W_out x F x C sgemm on
// shifted windows of the input, accumulating (beta = 1) into the zero-filled output; no
// im2col copy. The zero fill stays (as a store loop nest, before the call). The (n, oh)
// loops, which write disjoint output rows, run as one flat range of 2*8 on Kiln's thread
// pool; each chunk's gemms run on its own thread.
// CHECK-LABEL: func.func @main
// CHECK: memref.store %{{.*}}, %arg2
// CHECK: call @kiln_gemm_0
// CHECK-LABEL: func.func private @kiln_gemm_0_body
// CHECK-DAG: %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK: call @kiln_blas_set_threads
// CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step
// CHECK: arith.divui
// CHECK: scf.for
// CHECK: scf.for
// CHECK: call @kiln_blas_sgemm({{.*}}, %[[ONE]], {{.*}})
// CHECK-LABEL: func.func private @kiln_gemm_0(
// CHECK: call @kiln_parallel_for(%{{.*}}, %{{.*}}, %c16_i64)
func.func @main(%x: tensor<2x10x10x32xf32>, %w: tensor<3x3x32x48xf32>) -> tensor<2x8x8x48xf32> {
  %0 = stablehlo.convolution(%x, %w) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f],
       window = {stride = [1, 1], pad = [[0, 0], [0, 0]]}
       {batch_group_count = 1 : i64, feature_group_count = 1 : i64}
       : (tensor<2x10x10x32xf32>, tensor<3x3x32x48xf32>) -> tensor<2x8x8x48xf32>
  return %0 : tensor<2x8x8x48xf32>
}
