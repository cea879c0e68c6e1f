// RUN: not kiln-opt %s --pass kiln-lower-custom-calls --split-input-file 2> %t.err | FileCheck %s
// RUN: FileCheck %s --check-prefix=ERR < %t.err

// A call of a registered target (JAX's LAPACK Cholesky is built in) becomes a call of the
// runtime's dispatcher over the operand and result buffers.
// CHECK-LABEL: func.func @main
// CHECK-NOT: stablehlo.custom_call
// CHECK: bufferization.to_buffer
// CHECK: func.call @kiln_custom_call
// CHECK: bufferization.to_tensor
func.func @main(%a: tensor<3x3xf32>) -> tensor<3x3xf32> {
  %0:2 = stablehlo.custom_call @lapack_spotrf_ffi(%a) {mhlo.backend_config = {uplo = 76 : ui8}, operand_layouts = [dense<[0, 1]> : tensor<2xindex>], result_layouts = [dense<[0, 1]> : tensor<2xindex>, dense<> : tensor<0xindex>]} : (tensor<3x3xf32>) -> (tensor<3x3xf32>, tensor<i32>)
  return %0#0 : tensor<3x3xf32>
}

// -----

// Without custom calls nothing changes.
// CHECK-LABEL: func.func @main
// CHECK-NEXT: stablehlo.negate
func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {
  %0 = stablehlo.negate %a : tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

// An unknown target is a located error naming it.
// ERR: kiln-lower-custom-calls.mlir:[[# @LINE + 2]]:8: unknown custom-call target 'no_such_kernel'
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.custom_call @no_such_kernel(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
