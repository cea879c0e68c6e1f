// RUN: kiln-opt %s --split-input-file --pass kiln-refine-entry-results | FileCheck %s

// The entry returns the static value behind the cast, and says so in its signature.
// CHECK-LABEL: func.func @main(%arg0: tensor<4x3xf32>) -> tensor<4x3xf32>
// CHECK: return %arg0 : tensor<4x3xf32>
func.func @main(%x: tensor<4x3xf32>) -> tensor<4x?xf32> {
  %c = tensor.cast %x : tensor<4x3xf32> to tensor<4x?xf32>
  return %c : tensor<4x?xf32>
}

// -----

// Nothing more static to return: unchanged.
// CHECK-LABEL: func.func @main(%arg0: tensor<?xf32>) -> tensor<?xf32>
func.func @main(%x: tensor<?xf32>) -> tensor<?xf32> {
  return %x : tensor<?xf32>
}
