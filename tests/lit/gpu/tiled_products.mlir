// RUN: kiln-opt %s --pass kiln-gpu-tiled-products --split-input-file | FileCheck %s

// A 100x70 by 70x50 product (linalg.matmul generalized, then kiln-gpu-order-dimensions: N
// first): grid (1 tile of N, 2 of M), 16x16 threads, shared tiles of A (16 x 65, k-major)
// and B. Each thread's 16 accumulators start from C; 4 full steps of K=16 (4 guarded loads
// of each tile, a barrier, 16 rank-1 updates, a barrier), then the 6 left over.
// CHECK-LABEL: func.func @matmul
// CHECK: gpu.launch blocks({{.*}}) in (%{{.*}} = %c1{{.*}}, %{{.*}} = %c2{{.*}}, %{{.*}} = %c1{{.*}}) threads({{.*}}) in (%{{.*}} = %c16{{.*}}, %{{.*}} = %c16{{.*}}, %{{.*}} = %c1{{.*}}) workgroup(%[[A:.*]] : memref<16x65xf32, #gpu.address_space<workgroup>>, %[[B:.*]] : memref<16x65xf32, #gpu.address_space<workgroup>>)
// CHECK-COUNT-16: memref.load %arg2
// CHECK: scf.for %{{.*}} = %c0{{.*}} to %c64{{.*}} step %c16{{.*}} iter_args
// CHECK-COUNT-4: memref.store %{{.*}}, %[[A]]
// CHECK-COUNT-4: memref.store %{{.*}}, %[[B]]
// CHECK: gpu.barrier
// CHECK: scf.for %{{.*}} = %c0{{.*}} to %c16{{.*}} step %c1
// CHECK-COUNT-4: memref.load %[[A]]
// CHECK-COUNT-4: memref.load %[[B]]
// CHECK-COUNT-16: arith.addf {{.*}} fastmath<contract>
// CHECK: gpu.barrier
// CHECK: scf.for %{{.*}} = %c0{{.*}} to %c6{{.*}} step %c1
// CHECK: gpu.barrier
// CHECK-COUNT-16: memref.store %{{.*}}, %arg2
// CHECK-NOT: linalg.generic
#a = affine_map<(d0, d1, d2) -> (d1, d2)>
#b = affine_map<(d0, d1, d2) -> (d2, d0)>
#c = affine_map<(d0, d1, d2) -> (d1, d0)>
func.func @matmul(%x: memref<100x70xf32>, %y: memref<70x50xf32>, %o: memref<100x50xf32>) {
  linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %y : memref<100x70xf32>, memref<70x50xf32>) outs(%o : memref<100x50xf32>) {
  ^bb0(%p: f32, %q: f32, %acc: f32):
    %m = arith.mulf %p, %q : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// A batch of 3 of bf16 products accumulated in f32, B transposed (K contiguous in both):
// the batch is blockIdx.z; bf16 tiles; the extensions happen in the updates.
// CHECK-LABEL: func.func @batch_bf16
// CHECK: gpu.launch blocks(%{{.*}}, %{{.*}}, %[[BZ:.*]]) in (%{{.*}} = %c1{{.*}}, %{{.*}} = %c2{{.*}}, %{{.*}} = %c3{{.*}}) threads({{.*}}) workgroup(%{{.*}} : memref<16x65xbf16, #gpu.address_space<workgroup>>, %{{.*}} : memref<16x65xbf16, #gpu.address_space<workgroup>>)
// CHECK: memref.load %arg0[%[[BZ]], %{{.*}}, %{{.*}}] : memref<3x100x70xbf16>
// CHECK: memref.load %arg1[%[[BZ]], %{{.*}}, %{{.*}}] : memref<3x50x70xbf16>
// CHECK: arith.extf
// CHECK: arith.mulf {{.*}} fastmath<contract>
#ba = affine_map<(d0, d1, d2, d3) -> (d1, d2, d3)>
#bb = affine_map<(d0, d1, d2, d3) -> (d1, d0, d3)>
#bc = affine_map<(d0, d1, d2, d3) -> (d1, d2, d0)>
func.func @batch_bf16(%x: memref<3x100x70xbf16>, %y: memref<3x50x70xbf16>, %o: memref<3x100x50xf32>) {
  linalg.generic {indexing_maps = [#ba, #bb, #bc], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%x, %y : memref<3x100x70xbf16>, memref<3x50x70xbf16>) outs(%o : memref<3x100x50xf32>) {
  ^bb0(%p: bf16, %q: bf16, %acc: f32):
    %pe = arith.extf %p : bf16 to f32
    %qe = arith.extf %q : bf16 to f32
    %m = arith.mulf %pe, %qe : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// A 3x3 convolution, NHWC x HWCF (linalg.conv_2d_nhwc_hwcf generalized): an implicit GEMM,
// M = 2 x 8 x 8 output pixels, N = 24 features, K = 3 x 3 x 20; the input is read at
// 2 * oh + kh through affine.apply. K = 180: 11 full steps and 4 left over.
// CHECK-LABEL: func.func @conv
// CHECK: gpu.launch blocks({{.*}}) in (%{{.*}} = %c1{{.*}}, %{{.*}} = %c2{{.*}}, %{{.*}} = %c1{{.*}}) threads
// CHECK: scf.for %{{.*}} = %c0{{.*}} to %c176{{.*}} step %c16
// CHECK: affine.apply
// CHECK: scf.for %{{.*}} = %c0{{.*}} to %c4{{.*}} step %c1
#ci = affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d1, d2 * 2 + d4, d3 * 2 + d5, d6)>
#cw = affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d4, d5, d6, d0)>
#co = affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d1, d2, d3, d0)>
func.func @conv(%x: memref<2x17x17x20xf32>, %w: memref<3x3x20x24xf32>, %o: memref<2x8x8x24xf32>) {
  linalg.generic {indexing_maps = [#ci, #cw, #co], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]}
      ins(%x, %w : memref<2x17x17x20xf32>, memref<3x3x20x24xf32>) outs(%o : memref<2x8x8x24xf32>) {
  ^bb0(%p: f32, %q: f32, %acc: f32):
    %m = arith.mulf %p, %q : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// A matrix-vector product (N = 1) is left to one thread per output element.
// CHECK-LABEL: func.func @matvec
// CHECK-NOT: gpu.launch
// CHECK: linalg.generic
#va = affine_map<(d0, d1) -> (d0, d1)>
#vb = affine_map<(d0, d1) -> (d1)>
#vc = affine_map<(d0, d1) -> (d0)>
func.func @matvec(%x: memref<100x70xf32>, %y: memref<70xf32>, %o: memref<100xf32>) {
  linalg.generic {indexing_maps = [#va, #vb, #vc], iterator_types = ["parallel", "reduction"]}
      ins(%x, %y : memref<100x70xf32>, memref<70xf32>) outs(%o : memref<100xf32>) {
  ^bb0(%p: f32, %q: f32, %acc: f32):
    %m = arith.mulf %p, %q : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  return
}
