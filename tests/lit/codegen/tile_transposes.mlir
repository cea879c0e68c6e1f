// RUN: kiln-opt %s --pass kiln-tile-transposes --split-input-file | FileCheck %s

// A 3-D transpose (2, 0, 1): blocks of 32 along the output's contiguous dimension (d2,
// innermost) and the input's (d0); the middle dimension one at a time; the op itself runs
// on each block's subviews.
// CHECK-LABEL: func.func @transpose3d
// CHECK: scf.for %[[C:.*]] = %c0 to %c64 step %c32
// CHECK:   scf.for %[[I:.*]] = %c0 to %c256 step %c1
// CHECK:     scf.for %[[J:.*]] = %c0 to %c256{{.*}} step %c32
// CHECK:       %[[A:.*]] = memref.subview %arg0[%[[I]], %[[J]], %[[C]]] [1, 32, 32] [1, 1, 1]
// CHECK:       %[[B:.*]] = memref.subview %arg1[%[[C]], %[[I]], %[[J]]] [32, 1, 32] [1, 1, 1]
// CHECK:       linalg.generic {{.*}} ins(%[[A]] : {{.*}}) outs(%[[B]] : {{.*}})
#in = affine_map<(d0, d1, d2) -> (d1, d2, d0)>
#out = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
func.func @transpose3d(%x: memref<256x256x64xf32>, %y: memref<64x256x256xf32>) {
  linalg.generic {indexing_maps = [#in, #out], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x : memref<256x256x64xf32>) outs(%y : memref<64x256x256xf32>) {
  ^bb0(%a: f32, %b: f32):
    linalg.yield %a : f32
  }
  return
}

// -----

// Odd extents: the last block is smaller (affine.min); f64 blocks are 16 wide.
// CHECK-LABEL: func.func @odd
// CHECK: scf.for %[[I:.*]] = %c0 to %c100 step %c16
// CHECK:   affine.min #{{.*}}(%[[I]])[%c100]
// CHECK:   scf.for %[[J:.*]] = %c0 to %c300 step %c16
// CHECK:     affine.min #{{.*}}(%[[J]])[%c300]
// CHECK:     memref.subview %arg0[%[[J]], %[[I]]] [%{{.*}}, %{{.*}}] [1, 1] : memref<300x100xf64> to memref<?x?xf64, strided<[100, 1], offset: ?>>
#t = affine_map<(d0, d1) -> (d1, d0)>
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @odd(%x: memref<300x100xf64>, %y: memref<100x300xf64>) {
  linalg.generic {indexing_maps = [#t, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<300x100xf64>) outs(%y : memref<100x300xf64>) {
  ^bb0(%a: f64, %b: f64):
    %e = math.exp %a : f64
    linalg.yield %e : f64
  }
  return
}

// -----

// Left alone: no transposed operand, and a small transpose.
// CHECK-LABEL: func.func @plain
// CHECK-NOT: scf.for
// CHECK-LABEL: func.func @small
// CHECK-NOT: scf.for
#t = affine_map<(d0, d1) -> (d1, d0)>
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @plain(%x: memref<300x100xf32>, %y: memref<300x100xf32>) {
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<300x100xf32>) outs(%y : memref<300x100xf32>) {
  ^bb0(%a: f32, %b: f32):
    linalg.yield %a : f32
  }
  return
}
func.func @small(%x: memref<16x8xf32>, %y: memref<8x16xf32>) {
  linalg.generic {indexing_maps = [#t, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<16x8xf32>) outs(%y : memref<8x16xf32>) {
  ^bb0(%a: f32, %b: f32):
    linalg.yield %a : f32
  }
  return
}
