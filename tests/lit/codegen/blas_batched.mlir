// RUN: kiln-opt %s --stage codegen | FileCheck %s

// Attention-style scores q @ k^T with batch dims (b, h): a loop over the 2x4 batch around a
// gemm with B transposed (112), each iteration offsetting the three base pointers.
// CHECK-LABEL: func.func private @kiln_gemm_0
// CHECK-DAG: arith.constant 112 : i32
// CHECK: scf.for
// CHECK: scf.for
// CHECK: call @kiln_blas_sgemm
func.func @main(%q: tensor<2x4x64x32xf32>, %k: tensor<2x4x64x32xf32>) -> tensor<2x4x64x64xf32> {
  %0 = stablehlo.dot_general %q, %k, batching_dims = [0, 1] x [0, 1], contracting_dims = [3] x [3] : (tensor<2x4x64x32xf32>, tensor<2x4x64x32xf32>) -> tensor<2x4x64x64xf32>
  return %0 : tensor<2x4x64x64xf32>
}
