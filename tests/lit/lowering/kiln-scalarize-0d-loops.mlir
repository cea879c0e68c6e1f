// RUN: kiln-opt %s --pass kiln-scalarize-0d-loops --split-input-file | FileCheck %s

// Inside a loop Kiln marked `kiln.scalarize`, a 0-d linalg.generic (what upstream makes of
// a 0-d StableHLO op) becomes its scalar body between tensor.extract and
// tensor.from_elements, so no iteration allocates a buffer; the mark is removed.
// CHECK-LABEL: func.func @main
// CHECK: scf.for
// CHECK-NOT: linalg.generic
// CHECK: tensor.extract
// CHECK: arith.addf
// CHECK: tensor.from_elements
// CHECK-NOT: kiln.scalarize
#map = affine_map<() -> ()>
func.func @main(%x: tensor<f32>) -> tensor<f32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %0 = scf.for %i = %c0 to %c4 step %c1 iter_args(%acc = %x) -> (tensor<f32>) {
    %e = tensor.empty() : tensor<f32>
    %s = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = []} ins(%acc, %x : tensor<f32>, tensor<f32>) outs(%e : tensor<f32>) {
    ^bb0(%a: f32, %b: f32, %out: f32):
      %sum = arith.addf %a, %b : f32
      linalg.yield %sum : f32
    } -> tensor<f32>
    scf.yield %s : tensor<f32>
  } {kiln.scalarize}
  return %0 : tensor<f32>
}

// -----

// Unmarked loops keep their generics.
// CHECK-LABEL: func.func @main
// CHECK: scf.for
// CHECK: linalg.generic
#map = affine_map<() -> ()>
func.func @main(%x: tensor<f32>) -> tensor<f32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %0 = scf.for %i = %c0 to %c4 step %c1 iter_args(%acc = %x) -> (tensor<f32>) {
    %e = tensor.empty() : tensor<f32>
    %s = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = []} ins(%acc, %x : tensor<f32>, tensor<f32>) outs(%e : tensor<f32>) {
    ^bb0(%a: f32, %b: f32, %out: f32):
      %sum = arith.addf %a, %b : f32
      linalg.yield %sum : f32
    } -> tensor<f32>
    scf.yield %s : tensor<f32>
  }
  return %0 : tensor<f32>
}
