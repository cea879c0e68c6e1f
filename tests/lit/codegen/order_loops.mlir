// RUN: kiln-opt %s --pass kiln-order-loops --split-input-file | FileCheck %s

// A column sum of a row-major matrix: the reduction dimension moves outermost, so the
// innermost loop walks both the input rows and the outputs contiguously.
// CHECK: #[[IN:.*]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK: #[[OUT:.*]] = affine_map<(d0, d1) -> (d1)>
// CHECK-LABEL: func.func @column_sum
// CHECK: linalg.generic {indexing_maps = [#[[IN]], #[[OUT]]], iterator_types = ["reduction", "parallel"]}
#in = affine_map<(d0, d1) -> (d1, d0)>
#out = affine_map<(d0, d1) -> (d0)>
func.func @column_sum(%x: memref<4096x1024xf32>, %o: memref<1024xf32>) {
  linalg.generic {indexing_maps = [#in, #out], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<4096x1024xf32>) outs(%o : memref<1024xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %acc, %a : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// A 3x3 pooling window over NHWC: the channel dimension (contiguous) goes innermost, the
// window just outside it, window rows before window columns as before (each output element
// adds its window in the same order): each output pixel adds 9 channel vectors.
// CHECK: #[[X:.*]] = affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1 + d3, d2 + d4, d5)>
// CHECK-LABEL: func.func @pool
// CHECK: iterator_types = ["parallel", "parallel", "parallel", "reduction", "reduction", "parallel"]
#x = affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1 + d4, d2 + d5, d3)>
#w = affine_map<(d0, d1, d2, d3, d4, d5) -> (d4, d5)>
#y = affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2, d3)>
func.func @pool(%x: memref<2x18x18x64xf32>, %w: memref<3x3xf32>, %y: memref<2x16x16x64xf32>) {
  linalg.generic {indexing_maps = [#x, #w, #y], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction"]}
      ins(%x, %w : memref<2x18x18x64xf32>, memref<3x3xf32>) outs(%y : memref<2x16x16x64xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %s = arith.addf %acc, %a : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// linalg.index is renumbered with the dimensions it names.
// CHECK-LABEL: func.func @indexed
// CHECK: iterator_types = ["reduction", "parallel"]
// CHECK: linalg.index 0 : index
// CHECK: linalg.index 1 : index
#in = affine_map<(d0, d1) -> (d1, d0)>
#out = affine_map<(d0, d1) -> (d0)>
func.func @indexed(%x: memref<512x256xi64>, %o: memref<256xi64>) {
  linalg.generic {indexing_maps = [#in, #out], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<512x256xi64>) outs(%o : memref<256xi64>) {
  ^bb0(%a: i64, %acc: i64):
    %r = linalg.index 1 : index
    %c = linalg.index 0 : index
    %ri = arith.index_cast %r : index to i64
    %ci = arith.index_cast %c : index to i64
    %t = arith.muli %ri, %ci : i64
    %u = arith.addi %t, %a : i64
    %s = arith.addi %acc, %u : i64
    linalg.yield %s : i64
  }
  return
}

// -----

// Left alone: an update that reads its output through another indexing (order matters),
// and an op already in order.
// CHECK: #[[T:.*]] = affine_map<(d0, d1) -> (d1, d0)>
// CHECK: #[[ID:.*]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-LABEL: func.func @in_place_transpose
// CHECK: indexing_maps = [#[[T]], #[[ID]]]
// CHECK-LABEL: func.func @in_order
// CHECK: indexing_maps = [#[[ID]], #[[ID]]]
#t = affine_map<(d0, d1) -> (d1, d0)>
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @in_place_transpose(%x: memref<64x64xf32>) {
  linalg.generic {indexing_maps = [#t, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<64x64xf32>) outs(%x : memref<64x64xf32>) {
  ^bb0(%a: f32, %b: f32):
    linalg.yield %a : f32
  }
  return
}
func.func @in_order(%x: memref<64x64xf32>, %y: memref<64x64xf32>) {
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<64x64xf32>) outs(%y : memref<64x64xf32>) {
  ^bb0(%a: f32, %b: f32):
    linalg.yield %a : f32
  }
  return
}
