// RUN: kiln-opt %s --pass kiln-blas-calls --split-input-file | FileCheck %s

// A matrix-vector product becomes sgemv (gemm with n = 1 runs at half its speed): row major
// (101), no transpose (111), 256 x 512, lda 512, incx 1, beta 0 from the zero fill, incy 1.
// CHECK-LABEL: func.func @main
// CHECK-NOT: linalg.fill
// CHECK: call @kiln_gemm_0
// CHECK-LABEL: func.func private @kiln_gemm_0
// CHECK-DAG: %[[ROW:.*]] = arith.constant 101 : i32
// CHECK-DAG: %[[NT:.*]] = arith.constant 111 : i32
// CHECK-DAG: %[[M:.*]] = arith.constant 256 : i64
// CHECK-DAG: %[[K:.*]] = arith.constant 512 : i64
// CHECK-DAG: %[[ONE:.*]] = arith.constant 1 : i64
// CHECK-DAG: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK: call @kiln_blas_sgemv(%[[ROW]], %[[NT]], %[[M]], %[[K]], %{{.*}}, %{{.*}}, %[[K]], %{{.*}}, %[[ONE]], %[[ZERO]], %{{.*}}, %[[ONE]]) : (i32, i32, i64, i64, f32, !llvm.ptr, i64, !llvm.ptr, i64, f32, !llvm.ptr, i64) -> ()
// CHECK: func.func private @kiln_blas_sgemv
func.func @main(%a: memref<256x512xf32>, %x: memref<512xf32>, %y: memref<256xf32>) {
  %cst = arith.constant 0.000000e+00 : f32
  linalg.fill ins(%cst : f32) outs(%y : memref<256xf32>)
  linalg.matvec ins(%a, %x : memref<256x512xf32>, memref<512xf32>) outs(%y : memref<256xf32>)
  return
}

// -----

// x (1 x 512) @ W (512 x 384), a batch-1 layer: y = W^T x, gemv with the transpose (112) of
// the stored 512 x 384 matrix.
// CHECK-LABEL: func.func private @kiln_gemm_0
// CHECK-DAG: %[[T:.*]] = arith.constant 112 : i32
// CHECK-DAG: %[[K:.*]] = arith.constant 512 : i64
// CHECK-DAG: %[[N:.*]] = arith.constant 384 : i64
// CHECK: call @kiln_blas_dgemv(%{{.*}}, %[[T]], %[[K]], %[[N]], %{{.*}}, %{{.*}}, %[[N]],
func.func @main(%x: memref<1x512xf64>, %w: memref<512x384xf64>, %y: memref<1x384xf64>) {
  linalg.matmul ins(%x, %w : memref<1x512xf64>, memref<512x384xf64>) outs(%y : memref<1x384xf64>)
  return
}

// -----

// complex<f32> becomes cgemm, whose alpha and beta are passed by address: (1, 0) and (1, 0)
// here (no zero fill: C accumulates), stored in a small stack buffer.
// CHECK-LABEL: func.func private @kiln_gemm_0
// CHECK: %[[S:.*]] = memref.alloca() : memref<4xf32>
// CHECK-COUNT-4: memref.store %{{.*}}, %[[S]]
// CHECK: memref.extract_aligned_pointer_as_index %[[S]]
// CHECK: call @kiln_blas_cgemm({{.*}}) : (i32, i32, i32, i64, i64, i64, !llvm.ptr, !llvm.ptr, i64, !llvm.ptr, i64, !llvm.ptr, !llvm.ptr, i64) -> ()
func.func @main(%a: memref<64x64xcomplex<f32>>, %b: memref<64x64xcomplex<f32>>, %c: memref<64x64xcomplex<f32>>) {
  linalg.matmul ins(%a, %b : memref<64x64xcomplex<f32>>, memref<64x64xcomplex<f32>>) outs(%c : memref<64x64xcomplex<f32>>)
  return
}
