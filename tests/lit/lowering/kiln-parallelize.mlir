// RUN: kiln-opt %s --pass kiln-parallelize --split-input-file | FileCheck %s

// A large elementwise linalg.generic on buffers is outlined into a chunk body and run by
// the runtime's kiln_parallel_for.
// CHECK-LABEL: func.func @main
// CHECK-NOT: linalg.generic
// CHECK: call @kiln_parallel_for
// CHECK: linalg.generic
// CHECK: math.exp
#map = affine_map<(d0, d1) -> (d0, d1)>
func.func @main(%arg0: memref<512x512xf32>, %arg1: memref<512x512xf32>) {
  linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%arg0 : memref<512x512xf32>) outs(%arg1 : memref<512x512xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = math.exp %in : f32
    linalg.yield %0 : f32
  }
  return
}

// -----

// A small one stays serial.
// CHECK-LABEL: func.func @main
// CHECK-NOT: kiln_parallel_for
// CHECK: linalg.generic
#map = affine_map<(d0) -> (d0)>
func.func @main(%arg0: memref<8xf32>, %arg1: memref<8xf32>) {
  linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]} ins(%arg0 : memref<8xf32>) outs(%arg1 : memref<8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = math.exp %in : f32
    linalg.yield %0 : f32
  }
  return
}
