// RUN: kiln-opt %s --pass kiln-lower-jax-custom-calls --split-input-file | FileCheck %s

// lax.approx_max_k: exact top-k, a stable sort along reduction_dim whose comparator calls
// JAX's, sliced to the result's size; the init values (padding) are unused.
// CHECK-LABEL: func.func @main
// CHECK-NOT: custom_call
// CHECK: %[[S:.*]]:2 = "stablehlo.sort"(%arg0, %{{.*}}) <{dimension = 1 : i64, is_stable = true}>
// CHECK: ^bb0(%[[A:.*]]: tensor<f32>, %[[B:.*]]: tensor<f32>, %[[C:.*]]: tensor<i32>, %[[D:.*]]: tensor<i32>):
// CHECK: %[[P:.*]] = func.call @gt(%[[A]], %[[B]], %[[C]], %[[D]])
// CHECK: stablehlo.return %[[P]]
// CHECK: stablehlo.slice %[[S]]#0 [0:2, 0:3]
// CHECK: stablehlo.slice %[[S]]#1 [0:2, 0:3]
func.func private @gt(%a: tensor<f32>, %b: tensor<f32>, %c: tensor<i32>, %d: tensor<i32>) -> tensor<i1> {
  %0 = stablehlo.compare GT, %a, %b : (tensor<f32>, tensor<f32>) -> tensor<i1>
  return %0 : tensor<i1>
}
func.func @main(%x: tensor<2x8xf32>) -> (tensor<2x3xf32>, tensor<2x3xi32>) {
  %i = stablehlo.iota dim = 1 : tensor<2x8xi32>
  %c = stablehlo.constant dense<-1> : tensor<i32>
  %f = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %0:2 = stablehlo.custom_call @ApproxTopK(%x, %i, %f, %c) {called_computations = [@gt],
      mhlo.backend_config = {aggregate_to_topk = true, is_fallback = true, recall_target = 0.95 : f32,
                             reduction_dim = 1 : i64, reduction_input_size_override = -1 : i64, top_k = 3 : i64}}
      : (tensor<2x8xf32>, tensor<2x8xi32>, tensor<f32>, tensor<i32>) -> (tensor<2x3xf32>, tensor<2x3xi32>)
  return %0#0, %0#1 : tensor<2x3xf32>, tensor<2x3xi32>
}

// -----

// Device placement and sharding annotations are the identity on one CPU.
// CHECK-LABEL: func.func @placement
// CHECK-NOT: custom_call
// CHECK: return %arg0
func.func @placement(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.custom_call @annotate_device_placement(%x) {has_side_effect = true,
      mhlo.frontend_attributes = {_xla_buffer_placement = "pinned_host"}} : (tensor<4xf32>) -> tensor<4xf32>
  %1 = stablehlo.custom_call @Sharding(%0) {mhlo.sharding = "{replicated}"} : (tensor<4xf32>) -> tensor<4xf32>
  return %1 : tensor<4xf32>
}

// -----

// A dynamic RNG whose shape operand folded to a constant: rng_bit_generator of that shape.
// CHECK-LABEL: func.func @rng
// CHECK: stablehlo.rng_bit_generator %arg0, algorithm = DEFAULT : (tensor<2xui64>) -> (tensor<2xui64>, tensor<5x4xui32>)
func.func @rng(%s: tensor<2xui64>) -> tensor<5x4xui32> {
  %shape = stablehlo.constant dense<[5, 4]> : tensor<2xi32>
  %0:2 = stablehlo.custom_call @stablehlo.dynamic_rng_bit_generator(%s, %shape) {api_version = 2 : i32,
      rng_algorithm = #stablehlo<rng_algorithm DEFAULT>} : (tensor<2xui64>, tensor<2xi32>) -> (tensor<2xui64>, tensor<?x4xui32>)
  %1 = tensor.cast %0#1 : tensor<?x4xui32> to tensor<5x4xui32>
  return %1 : tensor<5x4xui32>
}

// -----

// shape_assertion: a constant true predicate is dropped; an unknown one stays a call of the
// built-in target, with the message as its backend_config.
// CHECK-LABEL: func.func @assertions
// CHECK-NOT: error_message = "always"
// CHECK: stablehlo.custom_call @shape_assertion(%arg0, %arg1) {api_version = 2 : i32, backend_config = "b = {0}",
func.func @assertions(%p: tensor<i1>, %b: tensor<i32>) {
  %t = stablehlo.constant dense<true> : tensor<i1>
  stablehlo.custom_call @shape_assertion(%t, %b) {api_version = 2 : i32, error_message = "always", has_side_effect = true} : (tensor<i1>, tensor<i32>) -> ()
  stablehlo.custom_call @shape_assertion(%p, %b) {api_version = 2 : i32, error_message = "b = {0}", has_side_effect = true} : (tensor<i1>, tensor<i32>) -> ()
  return
}

