// RUN: gcc -shared -fPIC -I%kiln_include %S/../../py/custom_call_src/seed_example.c -o %t.so
// RUN: env KILN_CUSTOM_CALL_LIBRARIES=%t.so not kiln-opt %s --pass kiln-lower-custom-calls --split-input-file 2>%t.err | FileCheck %s
// RUN: FileCheck %s --check-prefix=ERR < %t.err

// Tokens carry no data: a token operand or result is a null pointer in the leaf array (where
// XLA's original conventions pass one; the typed FFI sees a rank-0 TOKEN buffer with null
// data), its site leaf is recorded with element type !stablehlo.token, and a token result is
// after_all of the call's token operands, keeping the effects the call ordered in order.
// CHECK-LABEL: module attributes {kiln.call_sites = [{{.*}}\22operands\22: [{\22shape\22: [], \22dtype\22: \22|u1\22, \22view_perm\22: null, \22element\22: \22!stablehlo.token\22}
// CHECK-LABEL: func.func @threaded
// CHECK: %[[T:.*]] = stablehlo.after_all  : !stablehlo.token
// CHECK-NOT: bufferization.to_buffer %[[T]]
// CHECK: %[[NULL:.*]] = arith.constant 0 : i64
// CHECK: memref.alloca_scope
// CHECK: %[[ARR:.*]] = memref.alloca() : memref<4xi64>
// CHECK: memref.store %[[NULL]], %[[ARR]][%{{.*}}] : memref<4xi64>
// CHECK: memref.store %{{.*}}, %[[ARR]][%{{.*}}] : memref<4xi64>
// CHECK: memref.store %[[NULL]], %[[ARR]][%{{.*}}] : memref<4xi64>
// CHECK: func.call @kiln_custom_call
// CHECK: %[[OUT:.*]] = stablehlo.after_all %[[T]] : !stablehlo.token
// CHECK: return %[[OUT]], %{{.*}} : !stablehlo.token, tensor<4xf32>
func.func @threaded(%x: tensor<4xf32>) -> (!stablehlo.token, tensor<4xf32>) {
  %t = stablehlo.after_all : !stablehlo.token
  %r:2 = stablehlo.custom_call @do_custom_call(%t, %x) : (!stablehlo.token, tensor<4xf32>) -> (!stablehlo.token, tensor<4xf32>)
  return %r#0, %r#1 : !stablehlo.token, tensor<4xf32>
}

// -----

// A token inside a tuple result, with no token operand: a fresh token; the tuple folds away.
// CHECK-LABEL: func.func @in_a_tuple
// CHECK: memref.alloca() : memref<3xi64>
// CHECK: func.call @kiln_custom_call
// CHECK: %[[FRESH:.*]] = stablehlo.after_all  : !stablehlo.token
// CHECK-NOT: stablehlo.tuple
// CHECK: return %[[FRESH]], %{{.*}} : !stablehlo.token, tensor<2xi32>
func.func @in_a_tuple(%x: tensor<2xi32>) -> (!stablehlo.token, tensor<2xi32>) {
  %r = stablehlo.custom_call @do_custom_call(%x) : (tensor<2xi32>) -> tuple<!stablehlo.token, tensor<2xi32>>
  %t = stablehlo.get_tuple_element %r[0] : (tuple<!stablehlo.token, tensor<2xi32>>) -> !stablehlo.token
  %y = stablehlo.get_tuple_element %r[1] : (tuple<!stablehlo.token, tensor<2xi32>>) -> tensor<2xi32>
  return %t, %y : !stablehlo.token, tensor<2xi32>
}

// -----

// A token has no buffer to alias.
// ERR: tokens.mlir:[[# @LINE + 2]]:10: custom call 'do_custom_call' aliases a token (result 0, operand 0) (tokens have no buffer to share; alias arrays)
func.func @aliased(%t: !stablehlo.token, %x: tensor<4xf32>) -> tensor<4xf32> {
  %r:2 = stablehlo.custom_call @do_custom_call(%t, %x) {output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [0], operand_index = 0, operand_tuple_indices = []>]} : (!stablehlo.token, tensor<4xf32>) -> (!stablehlo.token, tensor<4xf32>)
  return %r#1 : tensor<4xf32>
}
