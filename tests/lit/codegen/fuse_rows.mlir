// RUN: kiln-opt %s --pass kiln-fuse-rows --split-input-file | FileCheck %s

// Softmax, bufferized: max, exp(x - max), sum, divide in place. One loop over blocks of 8
// rows runs all six ops (fills included) on the block's subviews; the per-row temporary
// becomes one block-sized buffer; 512x300 is below kiln-parallelize's size, so the loop
// stays in the function.
// CHECK-LABEL: func.func @softmax_like
// CHECK-NOT: memref.alloc()
// CHECK: %[[T:.*]] = memref.alloca() {alignment = 64 : i64} : memref<8xf32>
// CHECK: scf.for %[[R:.*]] = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK:   %[[M:.*]] = memref.subview %[[T]][0] [8] [1]
// CHECK:   linalg.fill {{.*}} outs(%[[M]]
// CHECK:   %[[X:.*]] = memref.subview %arg0[%[[R]], 0] [8, 300] [1, 1]
// CHECK:   linalg.generic {{.*}} ins(%[[X]] {{.*}} outs(%[[M]]
// CHECK:   %[[Y:.*]] = memref.subview %arg1[%[[R]], 0] [8, 300] [1, 1]
// CHECK:   linalg.generic {{.*}} ins(%[[X]], %[[M]] {{.*}} outs(%[[Y]]
// CHECK:   linalg.fill {{.*}} outs(%[[M]]
// CHECK:   linalg.generic {{.*}} ins(%[[Y]] {{.*}} outs(%[[M]]
// CHECK:   linalg.generic {{.*}} ins(%[[Y]], %[[M]] {{.*}} outs(%[[Y]]
// CHECK: } {kiln.fused_rows = 6 : i64}
// CHECK-NOT: memref.dealloc
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @softmax_like(%x: memref<512x300xf32>, %y: memref<512x300xf32>) {
  %ninf = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.0 : f32
  %m = memref.alloc() : memref<512xf32>
  linalg.fill ins(%ninf : f32) outs(%m : memref<512xf32>)
  linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]} ins(%x : memref<512x300xf32>) outs(%m : memref<512xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %0 = arith.maximumf %acc, %a : f32
    linalg.yield %0 : f32
  }
  linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]} ins(%x, %m : memref<512x300xf32>, memref<512xf32>) outs(%y : memref<512x300xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %0 = arith.subf %a, %b : f32
    %1 = math.exp %0 : f32
    linalg.yield %1 : f32
  }
  linalg.fill ins(%zero : f32) outs(%m : memref<512xf32>)
  linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]} ins(%y : memref<512x300xf32>) outs(%m : memref<512xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %0 = arith.addf %acc, %a : f32
    linalg.yield %0 : f32
  }
  linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]} ins(%y, %m : memref<512x300xf32>, memref<512xf32>) outs(%y : memref<512x300xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %0 = arith.divf %a, %b : f32
    linalg.yield %0 : f32
  }
  memref.dealloc %m : memref<512xf32>
  return
}

// -----

// Large: the blocks go to Kiln's thread pool, each thread running its rows [begin, end)
// in blocks; gamma (indexed by the columns only) is read whole. The result is returned, so
// the row statistic stays a full buffer the threads write their rows of.
// CHECK-LABEL: func.func @rms_like
// CHECK: call @kiln_parallel_for(%{{.*}}, %{{.*}}, %{{.*}}) : {{.*}}
// CHECK: func.func private @kiln_rows_body(%[[CTX:.*]]: !llvm.ptr, %[[B:.*]]: i64, %[[E:.*]]: i64)
// CHECK:   %[[BEGIN:.*]] = arith.index_cast %[[B]]
// CHECK:   %[[END:.*]] = arith.index_cast %[[E]]
// CHECK:   scf.for %[[R:.*]] = %[[BEGIN]] to %[[END]] step %{{.*}} {
// CHECK:     affine.min
// CHECK:     linalg.fill
// CHECK:     linalg.generic
// CHECK:     linalg.generic {{.*}} ins(%{{.*}}, %{{.*}}, %{{.*}} : memref<?x1024xf32, {{.*}}>, memref<?xf32, {{.*}}>, memref<1024xf32, strided<[1]>>)
// CHECK:   } {kiln.fused_rows = 3 : i64}
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#col = affine_map<(d0, d1) -> (d1)>
func.func @rms_like(%x: memref<2048x1024xf32>, %g: memref<1024xf32>, %y: memref<2048x1024xf32>, %s: memref<2048xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%s : memref<2048xf32>)
  linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]} ins(%x : memref<2048x1024xf32>) outs(%s : memref<2048xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %0 = arith.mulf %a, %a : f32
    %1 = arith.addf %acc, %0 : f32
    linalg.yield %1 : f32
  }
  linalg.generic {indexing_maps = [#id, #row, #col, #id], iterator_types = ["parallel", "parallel"]} ins(%x, %s, %g : memref<2048x1024xf32>, memref<2048xf32>, memref<1024xf32>) outs(%y : memref<2048x1024xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32, %o: f32):
    %0 = math.rsqrt %b : f32
    %1 = arith.mulf %a, %0 : f32
    %2 = arith.mulf %1, %c : f32
    linalg.yield %2 : f32
  }
  return
}

// -----

// Must not fuse: the second op reads the row sums mirrored (row 511 - i at row i), which the
// first op's later blocks have not written yet. Both ops stay as they are.
// CHECK-LABEL: func.func @mirrored
// CHECK-NOT: scf.for
// CHECK: linalg.generic
// CHECK: linalg.generic
// CHECK-NOT: kiln.fused_rows
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#mirror = affine_map<(d0, d1) -> (-d0 + 511)>
func.func @mirrored(%x: memref<512x300xf32>, %y: memref<512x300xf32>, %s: memref<512xf32>) {
  linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]} ins(%x : memref<512x300xf32>) outs(%s : memref<512xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %0 = arith.addf %acc, %a : f32
    linalg.yield %0 : f32
  }
  linalg.generic {indexing_maps = [#id, #mirror, #id], iterator_types = ["parallel", "parallel"]} ins(%x, %s : memref<512x300xf32>, memref<512xf32>) outs(%y : memref<512x300xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %0 = arith.mulf %a, %b : f32
    linalg.yield %0 : f32
  }
  return
}

// -----

// Must not fuse: a column reduction (its outermost dimension reduces over the rows) ends
// a run; the two row ops around it are a run of one loop nest each, left alone.
// CHECK-LABEL: func.func @column_in_between
// CHECK-NOT: kiln.fused_rows
#id = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @column_in_between(%x: memref<512x300xf32>, %y: memref<512x300xf32>, %c: memref<300xf32>, %s: memref<512xf32>) {
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%x : memref<512x300xf32>) outs(%y : memref<512x300xf32>) {
  ^bb0(%a: f32, %o: f32):
    %0 = math.exp %a : f32
    linalg.yield %0 : f32
  }
  linalg.generic {indexing_maps = [#id, #col], iterator_types = ["reduction", "parallel"]} ins(%y : memref<512x300xf32>) outs(%c : memref<300xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %0 = arith.addf %acc, %a : f32
    linalg.yield %0 : f32
  }
  linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]} ins(%y : memref<512x300xf32>) outs(%s : memref<512xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %0 = arith.addf %acc, %a : f32
    linalg.yield %0 : f32
  }
  return
}
