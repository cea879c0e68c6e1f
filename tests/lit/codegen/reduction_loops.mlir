// RUN: kiln-opt %s --pass kiln-reduction-loops --split-input-file | FileCheck %s

// Row reductions (argmax along rows, two outputs): one load of each output element before
// its reduction loop, the accumulators carried by the loop, one store after; the body's
// linalg.index becomes the loop index.
// CHECK-LABEL: func.func @argmax_rows
// CHECK: scf.for %[[I:.*]] = %c0 to %c64 step %c1 {
// CHECK:   %[[M:.*]] = memref.load %arg1[%[[I]]]
// CHECK:   %[[K:.*]] = memref.load %arg2[%[[I]]]
// CHECK:   %[[R:.*]]:2 = scf.for %[[J:.*]] = %c0 to %c100 step %c1 iter_args(%[[A:.*]] = %[[M]], %[[B:.*]] = %[[K]]) -> (f32, i32) {
// CHECK:     memref.load %arg0[%[[I]], %[[J]]]
// CHECK:     arith.index_cast %[[J]] : index to i32
// CHECK:     scf.yield
// CHECK:   memref.store %[[R]]#0, %arg1[%[[I]]]
// CHECK:   memref.store %[[R]]#1, %arg2[%[[I]]]
// CHECK-NOT: linalg.generic
#in = affine_map<(d0, d1) -> (d0, d1)>
#out = affine_map<(d0, d1) -> (d0)>
func.func @argmax_rows(%x: memref<64x100xf32>, %m: memref<64xf32>, %k: memref<64xi32>) {
  linalg.generic {indexing_maps = [#in, #out, #out], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<64x100xf32>) outs(%m, %k : memref<64xf32>, memref<64xi32>) {
  ^bb0(%a: f32, %best: f32, %at: i32):
    %j = linalg.index 1 : index
    %ji = arith.index_cast %j : index to i32
    %gt = arith.cmpf ogt, %best, %a : f32
    %v = arith.select %gt, %best, %a : f32
    %w = arith.select %gt, %at, %ji : i32
    linalg.yield %v, %w : f32, i32
  }
  return
}

// -----

// Two trailing reduction dimensions nest, both carrying the accumulator; an op whose
// innermost loop is parallel (a column sum) is left to convert-linalg-to-loops.
// CHECK-LABEL: func.func @sum_last_two
// CHECK: scf.for
// CHECK:   memref.load %arg1
// CHECK:   scf.for {{.*}} iter_args
// CHECK:     scf.for {{.*}} iter_args
// CHECK:       arith.addf
// CHECK-LABEL: func.func @column_sum
// CHECK: linalg.generic
#in3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#out3 = affine_map<(d0, d1, d2) -> (d0)>
func.func @sum_last_two(%x: memref<4x5x7xf32>, %o: memref<4xf32>) {
  linalg.generic {indexing_maps = [#in3, #out3], iterator_types = ["parallel", "reduction", "reduction"]}
      ins(%x : memref<4x5x7xf32>) outs(%o : memref<4xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %acc, %a : f32
    linalg.yield %s : f32
  }
  return
}
#in2 = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>
func.func @column_sum(%x: memref<8x16xf32>, %o: memref<16xf32>) {
  linalg.generic {indexing_maps = [#in2, #col], iterator_types = ["reduction", "parallel"]}
      ins(%x : memref<8x16xf32>) outs(%o : memref<16xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %acc, %a : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// Left alone: an input over the output's buffer (it reads the accumulator as it changes).
// CHECK-LABEL: func.func @reads_accumulator
// CHECK: linalg.generic
#in = affine_map<(d0, d1) -> (d1)>
#out = affine_map<(d0, d1) -> (d0)>
func.func @reads_accumulator(%o: memref<16xf32>) {
  linalg.generic {indexing_maps = [#in, #out], iterator_types = ["parallel", "reduction"]}
      ins(%o : memref<16xf32>) outs(%o : memref<16xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %acc, %a : f32
    linalg.yield %s : f32
  }
  return
}
