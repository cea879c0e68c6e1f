// RUN: kiln-opt %s --pass kiln-split-reductions --split-input-file | FileCheck %s

// A column sum (rows added into the output, reduction dimension outermost): 16 partial rows,
// each the sum of one contiguous block of 256 rows (a parallel dimension for
// kiln-parallelize), then the partials and the 4 rows left over added into the output.
// CHECK-LABEL: func.func @column_sum
// CHECK: %[[HEAD:.*]] = memref.subview %arg0[0, 0] [4096, 256] [1, 1]
// CHECK: %[[BLOCKS:.*]] = memref.expand_shape %[[HEAD]] {{\[\[}}0, 1], [2]] output_shape [16, 256, 256]
// CHECK: %[[P:.*]] = memref.alloc() {alignment = 64 : i64} : memref<16x256xf32>
// CHECK: %[[ZERO:.*]] = arith.constant -0.000000e+00 : f32
// CHECK: linalg.fill ins(%[[ZERO]] : f32) outs(%[[P]] : memref<16x256xf32>)
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "reduction", "parallel"]} ins(%[[BLOCKS]] {{.*}} outs(%[[P]]
// CHECK: linalg.generic {{.*}} iterator_types = ["reduction", "parallel"]} ins(%[[P]] {{.*}} outs(%arg1
// CHECK: %[[TAIL:.*]] = memref.subview %arg0[4096, 0] [4, 256] [1, 1]
// CHECK: linalg.generic {{.*}} iterator_types = ["reduction", "parallel"]} ins(%[[TAIL]] {{.*}} outs(%arg1
// CHECK: memref.dealloc %[[P]]
func.func @column_sum(%x: memref<4100x256xf32>, %y: memref<256xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>], iterator_types = ["reduction", "parallel"]} ins(%x : memref<4100x256xf32>) outs(%y : memref<256xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %0 = arith.addf %acc, %a : f32
    linalg.yield %0 : f32
  }
  return
}

// -----

// Two leading reduction dimensions and two kept ones (a max over the batch and time of a
// 3-D-by-2 array): flattened to rows x columns, output collapsed to the columns.
// CHECK-LABEL: func.func @batch_max
// CHECK: memref.collapse_shape %arg0 {{\[\[}}0, 1], [2, 3]] : memref<8x512x16x32xi32> into memref<4096x512xi32>
// CHECK: memref.collapse_shape %arg1 {{\[\[}}0, 1]] : memref<16x32xi32> into memref<512xi32>
// CHECK: arith.constant -2147483648 : i32
// CHECK: iterator_types = ["parallel", "reduction", "parallel"]
func.func @batch_max(%x: memref<8x512x16x32xi32>, %y: memref<16x32xi32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d2, d3)>], iterator_types = ["reduction", "reduction", "parallel", "parallel"]} ins(%x : memref<8x512x16x32xi32>) outs(%y : memref<16x32xi32>) {
  ^bb0(%a: i32, %acc: i32):
    %0 = arith.maxsi %acc, %a : i32
    linalg.yield %0 : i32
  }
  return
}

// -----

// Left alone: too small to be worth threads (and a body that is not combine(acc, f(x))).
// CHECK-LABEL: func.func @small_or_not_a_combiner
// CHECK-NOT: memref.alloc
// CHECK-COUNT-2: linalg.generic {{.*}} iterator_types = ["reduction", "parallel"]
// CHECK-NOT: linalg.generic
func.func @small_or_not_a_combiner(%x: memref<64x256xf32>, %y: memref<256xf32>, %z: memref<4096x256xf32>, %w: memref<256xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>], iterator_types = ["reduction", "parallel"]} ins(%x : memref<64x256xf32>) outs(%y : memref<256xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %0 = arith.addf %acc, %a : f32
    linalg.yield %0 : f32
  }
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>], iterator_types = ["reduction", "parallel"]} ins(%z : memref<4096x256xf32>) outs(%w : memref<256xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %0 = arith.subf %a, %acc : f32
    linalg.yield %0 : f32
  }
  return
}
