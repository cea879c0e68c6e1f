// RUN: kiln-opt %s --pass kiln-read-outputs-as-inputs --split-input-file | FileCheck %s
// RUN: kiln-opt %s --pass kiln-read-outputs-as-inputs,linalg-fuse-elementwise-ops --split-input-file | FileCheck %s --check-prefix=FUSED

// An outer product (a dot_general without contracting dimensions, as torch_xla's
// nn.Upsample writes it) reads its zero fill: the zero is used as a scalar and the output
// becomes empty. Fused into a consumer with one more loop, the product is computed in the
// consumer's body and nothing adds into an output indexed by fewer loops.
// CHECK-LABEL: func.func @outer_product
// CHECK-SAME: %[[A:.*]]: tensor<8xf32>
// CHECK: %[[ZERO:.*]] = arith.constant 0.0
// CHECK-NOT: linalg.fill
// CHECK: %[[EMPTY:.*]] = tensor.empty() : tensor<8x8xf32>
// CHECK-NOT: linalg.fill
// CHECK: linalg.generic {{.*}} ins(%[[A]], %[[A]] : tensor<8xf32>, tensor<8xf32>) outs(%[[EMPTY]] : tensor<8x8xf32>)
// CHECK: ^bb0(%[[X:.*]]: f32, %[[Y:.*]]: f32, %{{.*}}: f32):
// CHECK: %[[P:.*]] = arith.mulf %[[X]], %[[Y]]
// CHECK: arith.addf %[[ZERO]], %[[P]]
// FUSED-LABEL: func.func @outer_product
// FUSED: %[[R:.*]] = linalg.generic
// FUSED-SAME: outs(%{{.*}} : tensor<8x8x2xf32>)
// FUSED-NOT: linalg.generic
// FUSED: return %[[R]]
#a = affine_map<(d0, d1) -> (d0)>
#b = affine_map<(d0, d1) -> (d1)>
#o = affine_map<(d0, d1) -> (d0, d1)>
#c_in = affine_map<(d0, d1, d2) -> (d0, d1)>
#c_out = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
func.func @outer_product(%a: tensor<8xf32>, %x: tensor<8x8x2xf32>) -> tensor<8x8x2xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x8xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<8x8xf32>) -> tensor<8x8xf32>
  %p = linalg.generic {indexing_maps = [#a, #b, #o], iterator_types = ["parallel", "parallel"]} ins(%a, %a : tensor<8xf32>, tensor<8xf32>) outs(%f : tensor<8x8xf32>) {
  ^bb0(%i: f32, %j: f32, %o: f32):
    %m = arith.mulf %i, %j : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  } -> tensor<8x8xf32>
  %e2 = tensor.empty() : tensor<8x8x2xf32>
  %r = linalg.generic {indexing_maps = [#c_in, #c_out, #c_out], iterator_types = ["parallel", "parallel", "parallel"]} ins(%p, %x : tensor<8x8xf32>, tensor<8x8x2xf32>) outs(%e2 : tensor<8x8x2xf32>) {
  ^bb0(%i: f32, %j: f32, %o: f32):
    %m = arith.mulf %i, %j : f32
    linalg.yield %m : f32
  } -> tensor<8x8x2xf32>
  return %r : tensor<8x8x2xf32>
}

// -----

// Any other tensor an output starts from becomes an input with the output's map.
// CHECK-LABEL: func.func @accumulate
// CHECK-SAME: %[[A:.*]]: tensor<4x4xf32>, %[[INIT:.*]]: tensor<4x4xf32>
// CHECK: %[[EMPTY:.*]] = tensor.empty() : tensor<4x4xf32>
// CHECK: linalg.generic {{.*}} ins(%[[A]], %[[INIT]] : tensor<4x4xf32>, tensor<4x4xf32>) outs(%[[EMPTY]] : tensor<4x4xf32>)
// CHECK: ^bb0(%[[X:.*]]: f32, %[[Y:.*]]: f32, %{{.*}}: f32):
// CHECK: arith.addf %[[X]], %[[Y]]
#p = affine_map<(d0, d1) -> (d0, d1)>
func.func @accumulate(%a: tensor<4x4xf32>, %init: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %0 = linalg.generic {indexing_maps = [#p, #p], iterator_types = ["parallel", "parallel"]} ins(%a : tensor<4x4xf32>) outs(%init : tensor<4x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %s = arith.addf %in, %out : f32
    linalg.yield %s : f32
  } -> tensor<4x4xf32>
  return %0 : tensor<4x4xf32>
}

// -----

// Reductions read their outputs by nature: untouched.
// CHECK-LABEL: func.func @reduction
// CHECK: linalg.generic {{.*}} outs(%{{.*}} : tensor<4xf32>)
// CHECK: arith.addf %{{.*}}, %{{.*}}
#r_in = affine_map<(d0, d1) -> (d0, d1)>
#r_out = affine_map<(d0, d1) -> (d0)>
func.func @reduction(%a: tensor<4x4xf32>, %init: tensor<4xf32>) -> tensor<4xf32> {
  %0 = linalg.generic {indexing_maps = [#r_in, #r_out], iterator_types = ["parallel", "reduction"]} ins(%a : tensor<4x4xf32>) outs(%init : tensor<4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %s = arith.addf %in, %out : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
