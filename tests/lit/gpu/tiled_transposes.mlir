// RUN: kiln-opt %s --pass kiln-gpu-tiled-transposes --split-input-file | FileCheck %s

// A 100x70 transpose (after kiln-gpu-order-dimensions: d0 indexes the output's contiguous
// dimension, d1 the input's): grid of 32x32 tiles (4 along the output's 100, 3 along its
// 70), blocks of 32x8 threads. Four guarded reads of input[t][x] along t (threadIdx.x) into
// tile[x][t] (33 columns), a barrier, four guarded writes along x from tile[x][t].
// CHECK-LABEL: func.func @transpose
// CHECK: gpu.launch blocks(%[[BX:.*]], %[[BY:.*]], %{{.*}}) in (%{{.*}} = %c4{{.*}}, %{{.*}} = %c3{{.*}}, %{{.*}} = %c1{{.*}}) threads(%[[TX:.*]], %[[TY:.*]], %{{.*}}) in (%{{.*}} = %c32{{.*}}, %{{.*}} = %c8{{.*}}, %{{.*}} = %c1{{.*}}) workgroup(%[[TILE:.*]] : memref<32x33xf32, #gpu.address_space<workgroup>>)
// CHECK-COUNT-4: memref.store %{{.*}}, %[[TILE]][%{{.*}}, %[[TX]]]
// CHECK: gpu.barrier
// CHECK: %[[V:.*]] = memref.load %[[TILE]][%[[TX]], %[[TY]]]
// CHECK: memref.store %[[V]], %arg1
// CHECK-COUNT-3: memref.load %[[TILE]][%[[TX]], %{{.*}}]
// CHECK-NOT: gpu.barrier
// CHECK: gpu.terminator
#in = affine_map<(d0, d1) -> (d0, d1)>
#out = affine_map<(d0, d1) -> (d1, d0)>
func.func @transpose(%x: memref<100x70xf32>, %o: memref<70x100xf32>) {
  linalg.generic {indexing_maps = [#in, #out], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<100x70xf32>) outs(%o : memref<70x100xf32>) {
  ^bb0(%a: f32, %b: f32):
    linalg.yield %a : f32
  }
  return
}

// -----

// The last two dimensions of a batch of 5 swapped, and added to an input read where the
// output is written: only the transposed input goes through shared memory; the batch is
// blockIdx.z.
// CHECK-LABEL: func.func @batched_add
// CHECK: gpu.launch blocks(%{{.*}}, %{{.*}}, %[[BZ:.*]]) in (%{{.*}} = %c2{{.*}}, %{{.*}} = %c2{{.*}}, %{{.*}} = %c5{{.*}}) threads({{.*}}) workgroup(%[[TILE:.*]] : memref<32x33xf16, #gpu.address_space<workgroup>>)
// CHECK: memref.load %arg0[%[[BZ]], %{{.*}}, %{{.*}}] : memref<5x40x33xf16>
// CHECK: gpu.barrier
// CHECK: memref.load %[[TILE]]
// CHECK: memref.load %arg1[%[[BZ]], %{{.*}}, %{{.*}}] : memref<5x33x40xf16>
// CHECK: arith.addf
// CHECK: memref.store %{{.*}}, %arg2[%[[BZ]], %{{.*}}, %{{.*}}] : memref<5x33x40xf16>
#bin = affine_map<(d0, d1, d2) -> (d2, d0, d1)>
#bid = affine_map<(d0, d1, d2) -> (d2, d1, d0)>
func.func @batched_add(%x: memref<5x40x33xf16>, %y: memref<5x33x40xf16>, %o: memref<5x33x40xf16>) {
  linalg.generic {indexing_maps = [#bin, #bid, #bid], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x, %y : memref<5x40x33xf16>, memref<5x33x40xf16>) outs(%o : memref<5x33x40xf16>) {
  ^bb0(%a: f16, %b: f16, %c: f16):
    %s = arith.addf %a, %b : f16
    linalg.yield %s : f16
  }
  return
}

// -----

// A side under 16 (a 4x500 transpose) and a copy that keeps the contiguous dimension stay
// generics (one thread per element).
// CHECK-LABEL: func.func @left_alone
// CHECK-NOT: gpu.launch
// CHECK: linalg.generic
// CHECK: linalg.generic
#tin = affine_map<(d0, d1) -> (d1, d0)>
#tid = affine_map<(d0, d1) -> (d0, d1)>
func.func @left_alone(%x: memref<500x4xf32>, %o: memref<4x500xf32>, %y: memref<64x64xf32>, %p: memref<64x64xf32>) {
  linalg.generic {indexing_maps = [#tin, #tid], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<500x4xf32>) outs(%o : memref<4x500xf32>) {
  ^bb0(%a: f32, %b: f32):
    linalg.yield %a : f32
  }
  linalg.generic {indexing_maps = [#tid, #tid], iterator_types = ["parallel", "parallel"]}
      ins(%y : memref<64x64xf32>) outs(%p : memref<64x64xf32>) {
  ^bb0(%a: f32, %b: f32):
    linalg.yield %a : f32
  }
  return
}
