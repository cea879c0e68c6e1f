// RUN: kiln-opt %s --pass kiln-gpu-split-reductions | FileCheck %s

// A reduction to a scalar has no parallel dimension to give threads: 1024 partial sums
// (one thread each) from the combiner's identity, then their combination into the output.
// CHECK-LABEL: func.func @sum
// CHECK: memref.expand_shape {{.*}} output_shape [1024, 8]
// CHECK: %[[P:.*]] = memref.alloca() : memref<1024xf32>
// CHECK: linalg.fill ins(%{{.*}} : f32) outs(%[[P]] : memref<1024xf32>)
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]} ins(%{{.*}} : memref<1024x8xf32>) outs(%[[P]] : memref<1024xf32>)
// CHECK: linalg.generic {{.*}} iterator_types = ["reduction"]} ins(%[[P]] : memref<1024xf32>) outs(%arg1 : memref<f32>)
#in = affine_map<(d0) -> (d0)>
#out = affine_map<(d0) -> ()>
func.func @sum(%x: memref<8192xf32>, %o: memref<f32>) {
  linalg.generic {indexing_maps = [#in, #out], iterator_types = ["reduction"]}
      ins(%x : memref<8192xf32>) outs(%o : memref<f32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %acc, %a : f32
    linalg.yield %s : f32
  }
  return
}
