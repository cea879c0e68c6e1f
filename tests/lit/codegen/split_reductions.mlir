// RUN: kiln-opt %s --pass kiln-split-reductions --split-input-file | FileCheck %s

// A sum of 2^20 + 5 elements: 16 partial sums from -0.0 (a parallel dimension for
// kiln-parallelize), combined into the output, then the 5 elements past the last chunk.
// CHECK-LABEL: func.func @sum
// CHECK: %[[HEAD:.*]] = memref.subview %arg0[0] [1048576] [1]
// CHECK: %[[ROWS:.*]] = memref.expand_shape %[[HEAD]] {{\[\[}}0, 1]] output_shape [16, 65536]
// CHECK: %[[P:.*]] = memref.alloca() : memref<16xf32>
// CHECK: %[[ID:.*]] = arith.constant -0.000000e+00 : f32
// CHECK: linalg.fill ins(%[[ID]] : f32) outs(%[[P]] : memref<16xf32>)
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]} ins(%[[ROWS]] : memref<16x65536xf32>) outs(%[[P]] : memref<16xf32>)
// CHECK:   arith.mulf
// CHECK:   arith.addf
// CHECK: linalg.generic {{.*}} iterator_types = ["reduction"]} ins(%[[P]] : memref<16xf32>) outs(%arg1 : memref<f32>)
// CHECK: %[[TAIL:.*]] = memref.subview %arg0[1048576] [5] [1]
// CHECK: linalg.generic {{.*}} iterator_types = ["reduction"]} ins(%[[TAIL]] : {{.*}}) outs(%arg1 : memref<f32>)
// CHECK:   arith.mulf
#in = affine_map<(d0) -> (d0)>
#out = affine_map<(d0) -> ()>
func.func @sum(%x: memref<1048581xf32>, %o: memref<f32>) {
  linalg.generic {indexing_maps = [#in, #out], iterator_types = ["reduction"]}
      ins(%x : memref<1048581xf32>) outs(%o : memref<f32>) {
  ^bb0(%a: f32, %acc: f32):
    %sq = arith.mulf %a, %a : f32
    %s = arith.addf %acc, %sq : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// A signed integer max over a matrix: collapsed to one dimension; partials from INT_MIN.
// CHECK-LABEL: func.func @imax
// CHECK: memref.collapse_shape %arg0 {{\[\[}}0, 1]] : memref<1024x512xi32> into memref<524288xi32>
// CHECK: arith.constant -2147483648 : i32
// CHECK: arith.maxsi
// CHECK-NOT: memref.subview %{{.*}}[524288]
#in2 = affine_map<(d0, d1) -> (d0, d1)>
#out2 = affine_map<(d0, d1) -> ()>
func.func @imax(%x: memref<1024x512xi32>, %o: memref<i32>) {
  linalg.generic {indexing_maps = [#in2, #out2], iterator_types = ["reduction", "reduction"]}
      ins(%x : memref<1024x512xi32>) outs(%o : memref<i32>) {
  ^bb0(%a: i32, %acc: i32):
    %s = arith.maxsi %acc, %a : i32
    linalg.yield %s : i32
  }
  return
}

// -----

// Left alone: small reductions, and combiners with no identity (a division).
// CHECK-LABEL: func.func @small
// CHECK-NOT: memref.alloca
// CHECK-LABEL: func.func @no_identity
// CHECK-NOT: memref.alloca
#in = affine_map<(d0) -> (d0)>
#out = affine_map<(d0) -> ()>
func.func @small(%x: memref<1000xf32>, %o: memref<f32>) {
  linalg.generic {indexing_maps = [#in, #out], iterator_types = ["reduction"]}
      ins(%x : memref<1000xf32>) outs(%o : memref<f32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %acc, %a : f32
    linalg.yield %s : f32
  }
  return
}
func.func @no_identity(%x: memref<1048576xf32>, %o: memref<f32>) {
  linalg.generic {indexing_maps = [#in, #out], iterator_types = ["reduction"]}
      ins(%x : memref<1048576xf32>) outs(%o : memref<f32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.divf %acc, %a : f32
    linalg.yield %s : f32
  }
  return
}
