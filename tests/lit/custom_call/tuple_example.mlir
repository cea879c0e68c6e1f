// RUN: gcc -shared -fPIC -I%kiln_include %S/../../py/custom_call_src/tuple_example.c -o %t.so
// RUN: env KILN_CUSTOM_CALL_LIBRARIES=%t.so kiln-opt %s --stage legalize | FileCheck %s

// Seed 004's tuple example: the tuple operand is taken apart into its 4 leaf buffers and the
// tuple result into 2 fresh buffers; the call site records the nesting
// (operand: tuple of 3 with a tuple of 2 inside; result: tuple of 2), from which the runtime
// builds the seed's arrays of pointers. get_tuple_element of the result folds away, and the
// scratch element (index 1) is never read back.
// CHECK-LABEL: func.func @main
// CHECK-COUNT-4: bufferization.to_buffer %arg{{[0-3]}} read_only
// CHECK: %[[RES:.*]] = memref.alloc() {alignment = 64 : i64} : memref<512xf32>
// CHECK: memref.alloc() {alignment = 64 : i64} : memref<1024xf32>
// CHECK: memref.alloca() : memref<6xi64>
// CHECK: func.call @kiln_custom_call({{.*}}) {kiln.custom_call_target = "tuple_call"}
// CHECK: %[[T:.*]] = bufferization.to_tensor %[[RES]] restrict writable
// CHECK-NOT: stablehlo.
// CHECK: return %[[T]] : tensor<512xf32>
func.func @main(%a: tensor<32xf32>, %b: tensor<64xf32>, %c: tensor<128xf32>, %d: tensor<256xf32>) -> tensor<512xf32> {
  %inner = stablehlo.tuple %b, %c : tuple<tensor<64xf32>, tensor<128xf32>>
  %p0 = stablehlo.tuple %a, %inner, %d : tuple<tensor<32xf32>, tuple<tensor<64xf32>, tensor<128xf32>>, tensor<256xf32>>
  %r = stablehlo.custom_call @tuple_call(%p0) {api_version = 2 : i32} : (tuple<tensor<32xf32>, tuple<tensor<64xf32>, tensor<128xf32>>, tensor<256xf32>>) -> tuple<tensor<512xf32>, tensor<1024xf32>>
  %o = stablehlo.get_tuple_element %r[0] : (tuple<tensor<512xf32>, tensor<1024xf32>>) -> tensor<512xf32>
  return %o : tensor<512xf32>
}
