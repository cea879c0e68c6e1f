// RUN: gcc -shared -fPIC -I%kiln_include %S/../../py/custom_call_src/seed_example.c -o %t.so
// RUN: env KILN_CUSTOM_CALL_LIBRARIES=%t.so kiln-opt %s --stage legalize | FileCheck %s

// Operand/result layouts other than row-major (JAX's LAPACK calls use column-major): the
// operand is transposed into memory order before the call (a linalg transpose after upstream
// legalization) and the result back after it. Unsigned elements travel as signless buffers.
// An aliased output (result 1 <- operand 1) starts as a copy of its operand, and the target
// sees that one buffer in both places, as in XLA.
// CHECK: #[[TR:.*]] = affine_map<(d0, d1) -> (d1, d0)>
// CHECK-LABEL: func.func @main
// CHECK: %[[T:.*]] = linalg.generic {indexing_maps = [#[[TR]], {{.*}}ins(%arg0 : tensor<4x3xf32>) outs(%{{.*}} : tensor<3x4xf32>)
// CHECK: %[[TB:.*]] = bufferization.to_buffer %[[T]] read_only {kiln.custom_call_site = {{[0-9]+}} : i64} : tensor<3x4xf32> to memref<3x4xf32>
// CHECK: %[[UB:.*]] = bufferization.to_buffer %arg1 read_only {kiln.custom_call_site = {{[0-9]+}} : i64} : tensor<5xi8> to memref<5xi8>
// CHECK: %[[OUT0:.*]] = memref.alloc() {alignment = 64 : i64} : memref<3x4xf32>
// CHECK: %[[OUT1:.*]] = memref.alloc() {alignment = 64 : i64} : memref<5xi8>
// CHECK: memref.copy %[[UB]], %[[OUT1]]
// CHECK: extract_aligned_pointer_as_index %[[TB]]
// CHECK-NEXT: %[[P1:.*]] = arith.index_cast
// CHECK-NEXT: extract_aligned_pointer_as_index %[[OUT1]]
// CHECK: extract_aligned_pointer_as_index %[[OUT0]]
// CHECK: extract_aligned_pointer_as_index %[[OUT1]]
// CHECK: func.call @kiln_custom_call
// CHECK: %[[R0:.*]] = bufferization.to_tensor %[[OUT0]] restrict writable : memref<3x4xf32> to tensor<3x4xf32>
// CHECK: %[[R:.*]] = linalg.generic {indexing_maps = [#[[TR]], {{.*}}ins(%[[R0]] : tensor<3x4xf32>) outs(%{{.*}} : tensor<4x3xf32>)
// CHECK: %[[R1:.*]] = bufferization.to_tensor %[[OUT1]] restrict writable : memref<5xi8> to tensor<5xi8>
// CHECK: return %[[R]], %[[R1]]
func.func @main(%x: tensor<4x3xf32>, %u: tensor<5xui8>) -> (tensor<4x3xf32>, tensor<5xui8>) {
  %r:2 = stablehlo.custom_call @do_custom_call_status(%x, %u) {
    api_version = 2 : i32,
    operand_layouts = [dense<[0, 1]> : tensor<2xindex>, dense<0> : tensor<1xindex>],
    result_layouts = [dense<[0, 1]> : tensor<2xindex>, dense<0> : tensor<1xindex>],
    output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [1], operand_index = 1, operand_tuple_indices = []>]
  } : (tensor<4x3xf32>, tensor<5xui8>) -> (tensor<4x3xf32>, tensor<5xui8>)
  return %r#0, %r#1 : tensor<4x3xf32>, tensor<5xui8>
}
