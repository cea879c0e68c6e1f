// RUN: kiln-opt %s --pass kiln-gpu-block-reductions --split-input-file | FileCheck %s

// A row sum of 50 rows of 777: one block of 256 threads per row. Each thread starts from
// its first element (no identity needed) and strides by 256; a warp combines its partials
// with butterfly shuffles, lane 0 of each of the 8 warps writes partial and flag to shared
// memory, and after a barrier warp 0 combines them into the output element.
// CHECK-LABEL: func.func @row_sum
// CHECK: gpu.launch blocks(%[[B:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %c50{{.*}}, %{{.*}} = %c1{{.*}}, %{{.*}} = %c1{{.*}}) threads(%[[T:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %c256{{.*}}, %{{.*}} = %c1{{.*}}, %{{.*}} = %c1{{.*}}) workgroup(%[[V:.*]] : memref<8xi32, #gpu.address_space<workgroup>>, %[[F:.*]] : memref<8xi32, #gpu.address_space<workgroup>>)
// CHECK: %[[FIRST:.*]] = scf.if
// CHECK: math.exp
// CHECK: scf.for %{{.*}} = %{{.*}} to %c777{{.*}} step %c256{{.*}} iter_args(%{{.*}} = %[[FIRST]])
// CHECK: math.exp
// CHECK: arith.addf
// CHECK-COUNT-10: gpu.shuffle xor
// CHECK: memref.store %{{.*}}, %[[V]]
// CHECK: memref.store %{{.*}}, %[[F]]
// CHECK: gpu.barrier
// CHECK: memref.load %[[F]]
// CHECK-COUNT-10: gpu.shuffle xor
// CHECK: memref.load %arg1
// CHECK: arith.addf
// CHECK: memref.store %{{.*}}, %arg1
// CHECK-NOT: linalg.generic
#row = affine_map<(d0, d1) -> (d0, d1)>
#out = affine_map<(d0, d1) -> (d0)>
func.func @row_sum(%x: memref<50x777xf32>, %o: memref<50xf32>) {
  linalg.generic {indexing_maps = [#row, #out], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<50x777xf32>) outs(%o : memref<50xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %e = math.exp %a : f32
    %s = arith.addf %acc, %e : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// A row of 40 f64: one warp and a partial one (64 threads); 64-bit partials in shared
// memory. A full reduction (no parallel dimension) is one block.
// CHECK-LABEL: func.func @full_max
// CHECK: gpu.launch blocks({{.*}}) in ({{.*}} = %c1{{.*}}, {{.*}}) threads({{.*}}) in ({{.*}} = %c64{{.*}}, {{.*}}) workgroup({{.*}} : memref<2xi64, #gpu.address_space<workgroup>>, {{.*}} : memref<2xi32, #gpu.address_space<workgroup>>)
// CHECK: arith.maximumf
// CHECK: gpu.barrier
#in = affine_map<(d0) -> (d0)>
#scalar = affine_map<(d0) -> ()>
func.func @full_max(%x: memref<40xf64>, %o: memref<f64>) {
  linalg.generic {indexing_maps = [#in, #scalar], iterator_types = ["reduction"]}
      ins(%x : memref<40xf64>) outs(%o : memref<f64>) {
  ^bb0(%a: f64, %acc: f64):
    %m = arith.maximumf %acc, %a : f64
    linalg.yield %m : f64
  }
  return
}

// -----

// Rows of 8: a segment of 8 lanes each, 32 rows to a block of 256 (32 blocks for 1000);
// shuffles 4, 2, 1 stay inside a segment; no shared memory, no barrier.
// CHECK-LABEL: func.func @short_rows
// CHECK: gpu.launch blocks({{.*}}) in ({{.*}} = %c32{{.*}}, {{.*}}) threads({{.*}}) in ({{.*}} = %c256{{.*}}, {{.*}})
// CHECK-NOT: workgroup
// CHECK-COUNT-2: gpu.shuffle xor %{{.*}}, %c4_i32
// CHECK-COUNT-2: gpu.shuffle xor %{{.*}}, %c2_i32
// CHECK-COUNT-2: gpu.shuffle xor %{{.*}}, %c1_i32
// CHECK-NOT: gpu.barrier
// CHECK: memref.store %{{.*}}, %arg1
// CHECK: return
#rows = affine_map<(d0, d1) -> (d0, d1)>
#each = affine_map<(d0, d1) -> (d0)>
func.func @short_rows(%y: memref<1000x8xf32>, %p: memref<1000xf32>) {
  linalg.generic {indexing_maps = [#rows, #each], iterator_types = ["parallel", "reduction"]}
      ins(%y : memref<1000x8xf32>) outs(%p : memref<1000xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %acc, %a : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// Left as they are: a column reduction (the row strides through memory: a thread per
// column reads neighbouring addresses) and two accumulators (argmax).
// CHECK-LABEL: func.func @kept
// CHECK-NOT: gpu.launch
// CHECK-COUNT-2: linalg.generic
#t = affine_map<(d0, d1) -> (d1, d0)>
#r = affine_map<(d0, d1) -> (d0, d1)>
#o = affine_map<(d0, d1) -> (d0)>
func.func @kept(%x: memref<300x70xf32>, %o: memref<70xf32>, %y: memref<1000x8xf32>,
                %p: memref<1000xf32>, %q: memref<1000xi64>) {
  linalg.generic {indexing_maps = [#t, #o], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<300x70xf32>) outs(%o : memref<70xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %acc, %a : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#r, #o, #o], iterator_types = ["parallel", "reduction"]}
      ins(%y : memref<1000x8xf32>) outs(%p, %q : memref<1000xf32>, memref<1000xi64>) {
  ^bb0(%a: f32, %m: f32, %i: i64):
    %j = linalg.index 1 : index
    %ji = arith.index_cast %j : index to i64
    %gt = arith.cmpf ogt, %a, %m : f32
    %nm = arith.select %gt, %a, %m : f32
    %ni = arith.select %gt, %ji, %i : i64
    linalg.yield %nm, %ni : f32, i64
  }
  return
}
