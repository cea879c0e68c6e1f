// RUN: %python -c "import kiln, sys; print(kiln.compile(sys.argv[1]).ir('optimize', arg_shapes=[(), (3, 4), (2, 3, 4)]))" %s | FileCheck %s

// A JAX shape-polymorphic program compiled for concrete shapes: the dimension argument %b
// becomes the size the shapes imply (3), every shape computation folds, and the dynamic
// broadcast becomes a static one.
// CHECK-LABEL: func.func public @main
// CHECK-SAME: tensor<3x4xf32>
// CHECK-SAME: -> tensor<2x3x4xf32>
// CHECK-NOT: dynamic_broadcast_in_dim
// CHECK: stablehlo.broadcast_in_dim %{{.*}}, dims = [1, 2] : (tensor<3x4xf32>) -> tensor<2x3x4xf32>
// CHECK: stablehlo.add %{{.*}} : tensor<2x3x4xf32>
func.func public @main(%b: tensor<i64>, %x: tensor<?x4xf32>, %y: tensor<2x?x4xf32>) -> tensor<2x?x4xf32> {
  %c2 = stablehlo.constant dense<2> : tensor<1xi32>
  %c4 = stablehlo.constant dense<4> : tensor<1xi32>
  %0 = stablehlo.convert %b : (tensor<i64>) -> tensor<i32>
  %1 = stablehlo.reshape %0 : (tensor<i32>) -> tensor<1xi32>
  %2 = stablehlo.concatenate %c2, %1, %c4, dim = 0 : (tensor<1xi32>, tensor<1xi32>, tensor<1xi32>) -> tensor<3xi32>
  %3 = stablehlo.dynamic_broadcast_in_dim %x, %2, dims = [1, 2] : (tensor<?x4xf32>, tensor<3xi32>) -> tensor<2x?x4xf32>
  %4 = stablehlo.add %3, %y : tensor<2x?x4xf32>
  return %4 : tensor<2x?x4xf32>
}
