// RUN: kiln-opt %s --stage fuse | FileCheck %s --check-prefix=FUSE
// RUN: kiln-opt %s --stage codegen | FileCheck %s

// A large f32 matmul (a named linalg.matmul, or any pure dot_general) becomes a call of
// OpenBLAS's sgemm (numpy's bundled copy) (XLA:CPU calls a library for dots too). The bias
// add is not fused into the product: the product stays a pure linalg.contract through fusion
// (a named one too: upstream's reshape propagation would make it a generic fusion reaches).
// The zero fill before it becomes beta = 0.
// FUSE-LABEL: func.func @main
// FUSE: linalg.contract
// FUSE: linalg.generic
// FUSE-NOT: kiln_contraction

// CHECK-LABEL: func.func @main
// CHECK-NOT: linalg.fill
// CHECK: call @kiln_gemm_0(%arg0, %arg1, %{{.*}}) : (memref<128x64xf32>, memref<64x96xf32>, memref<128x96xf32>) -> ()
// CHECK: func.func private @kiln_gemm_0
// Row major (101), no transposes (111): M=128 N=96 K=64, lda=64 ldb=96 ldc=96, beta 0.
// CHECK-DAG: arith.constant 101 : i32
// CHECK-DAG: arith.constant 111 : i32
// CHECK-DAG: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK: memref.extract_aligned_pointer_as_index
// CHECK: llvm.inttoptr
// CHECK: call @kiln_blas_sgemm({{.*}}, %[[ZERO]], {{.*}}) : (i32, i32, i32, i64, i64, i64, f32, !llvm.ptr, i64, !llvm.ptr, i64, f32, !llvm.ptr, i64) -> ()
// CHECK: func.func private @kiln_blas_sgemm
func.func @main(%a: tensor<128x64xf32>, %b: tensor<64x96xf32>, %bias: tensor<96xf32>) -> tensor<128x96xf32> {
  %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : (tensor<128x64xf32>, tensor<64x96xf32>) -> tensor<128x96xf32>
  %1 = stablehlo.broadcast_in_dim %bias, dims = [1] : (tensor<96xf32>) -> tensor<128x96xf32>
  %2 = stablehlo.add %0, %1 : tensor<128x96xf32>
  return %2 : tensor<128x96xf32>
}
