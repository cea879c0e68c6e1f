// RUN: kiln-opt %s --pass kiln-gpu-order-dimensions --split-input-file | FileCheck %s

// The dimension indexing the output's contiguous (last) dimension becomes the first, which
// gpu-map-parallel-loops puts on threadIdx.x: consecutive threads, consecutive addresses.
// CHECK-DAG: #[[IN:.*]] = affine_map<(d0, d1) -> (d1, d0)>
// CHECK-LABEL: func.func @add
// CHECK: linalg.generic {indexing_maps = [#[[IN]], #[[IN]], #[[IN]]], iterator_types = ["parallel", "parallel"]}
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @add(%x: memref<64x100xf32>, %y: memref<64x100xf32>, %o: memref<64x100xf32>) {
  linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %y : memref<64x100xf32>, memref<64x100xf32>) outs(%o : memref<64x100xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// A row reduction keeps its reduction dimension innermost; its one parallel dimension is
// already first: nothing to do.
// CHECK-DAG: #[[ROW:.*]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG: #[[OUT:.*]] = affine_map<(d0, d1) -> (d0)>
// CHECK-LABEL: func.func @rows
// CHECK: linalg.generic {indexing_maps = [#[[ROW]], #[[OUT]]], iterator_types = ["parallel", "reduction"]}
#row = affine_map<(d0, d1) -> (d0, d1)>
#out = affine_map<(d0, d1) -> (d0)>
func.func @rows(%x: memref<8x16xf32>, %o: memref<8xf32>) {
  linalg.generic {indexing_maps = [#row, #out], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<8x16xf32>) outs(%o : memref<8xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %acc, %a : f32
    linalg.yield %s : f32
  }
  return
}
