// RUN: kiln-opt %s --stage fuse | FileCheck %s
// RUN: kiln-opt %s --stage codegen | FileCheck %s --check-prefix=CALL

// A product whose only user transposes it writes the transposed layout itself (as XLA
// folds the transpose into the dot's output layout): one linalg.contract whose output map
// is permuted, no copy; the call computes C^T = B^T A^T (M and N swapped: 80 x 96).
// CHECK-DAG: #[[OUT:.*]] = affine_map<(d0, d1, d2) -> (d1, d0)>
// CHECK-LABEL: func.func @main
// CHECK: linalg.contract indexing_maps = [#{{.*}}, #{{.*}}, #[[OUT]]]
// CHECK-NOT: linalg.generic
// CHECK: return
// CALL: call @kiln_sgemm_pooled(%{{.*}}, %{{.*}}, %{{.*}}, %c80_i64, %c96_i64, %c256_i64,
func.func @main(%a: tensor<256x96xf32>, %b: tensor<256x80xf32>) -> tensor<80x96xf32> {
  %0 = stablehlo.dot_general %a, %b, contracting_dims = [0] x [0] : (tensor<256x96xf32>, tensor<256x80xf32>) -> tensor<96x80xf32>
  %1 = stablehlo.transpose %0, dims = [1, 0] : (tensor<96x80xf32>) -> tensor<80x96xf32>
  return %1 : tensor<80x96xf32>
}
