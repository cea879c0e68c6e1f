// RUN: kiln-opt %s --pass kiln-gpu-count-inputs --split-input-file | FileCheck %s
// Before bufferization turns results into out-parameters, the entry records how many of its
// parameters are inputs: only the others are copied back to the host after a call.

// CHECK: func.func @main(%arg0: tensor<64x32xf32>) -> tensor<64xf32> attributes {kiln.gpu.inputs = 1 : i64}
#map = affine_map<(d0, d1) -> (d0, d1)>
#map1 = affine_map<(d0, d1) -> (d0)>
module {
  func.func @main(%arg0: tensor<64x32xf32>) -> tensor<64xf32> {
    %cst = arith.constant 0.000000e+00 : f32
    %0 = tensor.empty() : tensor<64xf32>
    %1 = linalg.fill ins(%cst : f32) outs(%0 : tensor<64xf32>) -> tensor<64xf32>
    %2 = linalg.generic {indexing_maps = [#map, #map1], iterator_types = ["parallel", "reduction"]} ins(%arg0 : tensor<64x32xf32>) outs(%1 : tensor<64xf32>) {
    ^bb0(%in: f32, %out: f32):
      %3 = math.tanh %in : f32
      %4 = arith.addf %out, %3 : f32
      linalg.yield %4 : f32
    } -> tensor<64xf32>
    return %2 : tensor<64xf32>
  }
}

// -----

// CHECK: func.func @main(%arg0: tensor<4xf32>, %arg1: tensor<4xi32>) -> (tensor<4xf32>, tensor<4xi32>) attributes {kiln.gpu.inputs = 2 : i64}
func.func @main(%arg0: tensor<4xf32>, %arg1: tensor<4xi32>) -> (tensor<4xf32>, tensor<4xi32>) {
  return %arg0, %arg1 : tensor<4xf32>, tensor<4xi32>
}
