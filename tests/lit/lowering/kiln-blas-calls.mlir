// RUN: kiln-opt %s --pass kiln-blas-calls --split-input-file | FileCheck %s

// A large f32 matmul on buffers (2^21 multiply-adds, PARALLEL_MACS and up) becomes a call of
// the runtime's pooled sgemm (row major, no transposes: the library's threads on an idle
// machine, pieces on Kiln's pool on a busy one), through a private function that passes the
// buffers' addresses.
// CHECK-LABEL: func.func @main
// CHECK-NOT: linalg.matmul
// CHECK: call @kiln_gemm_0(%{{.*}}, %{{.*}}, %{{.*}})
// CHECK-LABEL: func.func private @kiln_gemm_0
// CHECK: call @kiln_sgemm_pooled(
func.func @main(%arg0: memref<128x128xf32>, %arg1: memref<128x128xf32>, %arg2: memref<128x128xf32>) {
  %cst = arith.constant 0.000000e+00 : f32
  linalg.fill ins(%cst : f32) outs(%arg2 : memref<128x128xf32>)
  linalg.matmul ins(%arg0, %arg1 : memref<128x128xf32>, memref<128x128xf32>) outs(%arg2 : memref<128x128xf32>)
  return
}

// -----

// A smaller one (2^18) calls the library's sgemm directly, held to the calling thread.
// CHECK-LABEL: func.func private @kiln_gemm_0
// CHECK: %[[PREVIOUS:.*]] = call @kiln_blas_set_threads(%c1_i32)
// CHECK: call @kiln_blas_sgemm(
// CHECK: call @kiln_blas_set_threads(%[[PREVIOUS]])
func.func @main(%arg0: memref<64x64xf32>, %arg1: memref<64x64xf32>, %arg2: memref<64x64xf32>) {
  linalg.matmul ins(%arg0, %arg1 : memref<64x64xf32>, memref<64x64xf32>) outs(%arg2 : memref<64x64xf32>)
  return
}

// -----

// A small product stays a loop nest.
// CHECK-LABEL: func.func @main
// CHECK-NOT: call
// CHECK: linalg.matmul
func.func @main(%arg0: memref<2x2xf32>, %arg1: memref<2x2xf32>, %arg2: memref<2x2xf32>) {
  linalg.matmul ins(%arg0, %arg1 : memref<2x2xf32>, memref<2x2xf32>) outs(%arg2 : memref<2x2xf32>)
  return
}
