// RUN: kiln-opt %s --stage bufferize | FileCheck %s

// bufferize: tensors become memrefs, results become out-parameters the caller allocates
// (so nothing is returned and nothing leaks), and the entry gets a C interface.
// CHECK-LABEL: func.func @main
// CHECK-SAME: (%[[A:.*]]: memref<4x8xf32>, %[[OUT:.*]]: memref<8x4xf32>)
// CHECK-SAME: llvm.emit_c_interface
// CHECK-NOT: memref.alloc
// CHECK: linalg.generic
// CHECK-SAME: outs(%[[OUT]] : memref<8x4xf32>)
// CHECK: return
// CHECK-NOT: tensor<
func.func @main(%a: tensor<4x8xf32>) -> tensor<8x4xf32> {
  %0 = stablehlo.transpose %a, dims = [1, 0] : (tensor<4x8xf32>) -> tensor<8x4xf32>
  return %0 : tensor<8x4xf32>
}
