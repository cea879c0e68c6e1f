// RUN: kiln-opt %s --pass kiln-gpu-column-reductions --split-input-file | FileCheck %s

// A sum over axis 0 of 4096x1000 (after kiln-gpu-order-dimensions: the output's column
// first, the reduction last). 32 blocks of 32 columns would be too few, so the rows are cut
// into 8 slices of 512 (blockIdx.z), on 32 rows of threads: thread (x, y) starts from row
// 512z + y of its column and strides by 32; the partials meet in shared memory [32][32], a
// barrier, and row 0 combines them into the slice's partial. A second launch combines the
// 8 partials of each column (8 rows of threads) into the output element.
// CHECK-LABEL: func.func @col_sum
// CHECK: %[[SLICES:.*]] = memref.alloc() : memref<8x1000xf32>
// CHECK: gpu.launch blocks(%[[BX:.*]], %{{.*}}, %[[BZ:.*]]) in (%{{.*}} = %c32{{.*}}, %{{.*}} = %c1{{.*}}, %{{.*}} = %c8{{.*}}) threads(%[[TX:.*]], %[[TY:.*]], %{{.*}}) in (%{{.*}} = %c32{{.*}}, %{{.*}} = %c32{{.*}}, %{{.*}} = %c1{{.*}}) workgroup(%[[P:.*]] : memref<32x32xi32, #gpu.address_space<workgroup>>)
// CHECK: %[[COL:.*]] = arith.addi %{{.*}}, %[[TX]]
// CHECK: %[[IN:.*]] = arith.cmpi ult, %[[COL]], %c1000
// CHECK: %[[BEGIN:.*]] = arith.muli %[[BZ]], %c512
// CHECK: %[[END:.*]] = arith.select %{{.*}}, %c4096{{.*}}, %{{.*}}
// CHECK: %[[FIRST:.*]] = arith.addi %[[BEGIN]], %[[TY]]
// CHECK: scf.if %[[IN]] -> (f32)
// CHECK: memref.load %arg0[%[[FIRST]], %[[COL]]]
// CHECK: scf.for %{{.*}} = %{{.*}} to %[[END]] step %c32
// CHECK: arith.addf
// CHECK: memref.store %{{.*}}, %[[P]][%[[TY]], %[[TX]]]
// CHECK: gpu.barrier
// CHECK: scf.for %{{.*}} = %c1{{.*}} to %c32{{.*}} step %c1
// CHECK: memref.load %[[P]]
// CHECK: memref.store %{{.*}}, %[[SLICES]][%[[BZ]], %{{.*}}]
// CHECK: gpu.launch blocks({{.*}}) in (%{{.*}} = %c32{{.*}}, %{{.*}} = %c1{{.*}}, %{{.*}} = %c1{{.*}}) threads({{.*}}) in (%{{.*}} = %c32{{.*}}, %{{.*}} = %c8{{.*}}, %{{.*}} = %c1{{.*}}) workgroup(%{{.*}} : memref<8x32xi32, #gpu.address_space<workgroup>>)
// CHECK: memref.load %[[SLICES]]
// CHECK: gpu.barrier
// CHECK: memref.load %arg1[%[[COL2:.*]]]
// CHECK: memref.store %{{.*}}, %arg1[%[[COL2]]]
// CHECK-NOT: linalg.generic
#in = affine_map<(d0, d1) -> (d1, d0)>
#out = affine_map<(d0, d1) -> (d0)>
func.func @col_sum(%x: memref<4096x1000xf32>, %o: memref<1000xf32>) {
  linalg.generic {indexing_maps = [#in, #out], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<4096x1000xf32>) outs(%o : memref<1000xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %acc, %a : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// The max over axis 1 of 3x50x77: 3 output rows on blockIdx.y, 3 blocks of 32 columns,
// 8 rows of threads for 50 elements (too short to slice); i32 partials (f16 values packed).
// CHECK-LABEL: func.func @col_max_3d
// CHECK: gpu.launch blocks(%{{.*}}, %[[BY:.*]], %{{.*}}) in (%{{.*}} = %c3{{.*}}, %{{.*}} = %c3{{.*}}, %{{.*}} = %c1{{.*}}) threads({{.*}}) in (%{{.*}} = %c32{{.*}}, %{{.*}} = %c8{{.*}}, %{{.*}} = %c1{{.*}}) workgroup(%{{.*}} : memref<8x32xi32, #gpu.address_space<workgroup>>)
// CHECK: memref.load %arg0[%[[BY]], %{{.*}}, %{{.*}}] : memref<3x50x77xf16>
// CHECK: arith.maximumf
// CHECK: gpu.barrier
// CHECK: memref.store %{{.*}}, %arg1[%[[BY]], %{{.*}}] : memref<3x77xf16>
#in3 = affine_map<(d0, d1, d2) -> (d1, d2, d0)>
#out3 = affine_map<(d0, d1, d2) -> (d1, d0)>
func.func @col_max_3d(%x: memref<3x50x77xf16>, %o: memref<3x77xf16>) {
  linalg.generic {indexing_maps = [#in3, #out3], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x : memref<3x50x77xf16>) outs(%o : memref<3x77xf16>) {
  ^bb0(%a: f16, %acc: f16):
    %m = arith.maximumf %acc, %a : f16
    linalg.yield %m : f16
  }
  return
}

// -----

// Columns of 7: too short to split; the generic stays for one thread per output element.
// A row reduction (the reduced dimension contiguous) is not a column one either.
// CHECK-LABEL: func.func @short_columns
// CHECK-NOT: gpu.launch
// CHECK: linalg.generic
// CHECK: linalg.generic
#sin = affine_map<(d0, d1) -> (d1, d0)>
#sout = affine_map<(d0, d1) -> (d0)>
#rin = affine_map<(d0, d1) -> (d0, d1)>
func.func @short_columns(%x: memref<7x300xf32>, %o: memref<300xf32>, %y: memref<300x64xf32>) {
  linalg.generic {indexing_maps = [#sin, #sout], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<7x300xf32>) outs(%o : memref<300xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %acc, %a : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#rin, #sout], iterator_types = ["parallel", "reduction"]}
      ins(%y : memref<300x64xf32>) outs(%o : memref<300xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %acc, %a : f32
    linalg.yield %s : f32
  }
  return
}
