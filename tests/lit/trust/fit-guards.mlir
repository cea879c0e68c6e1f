// RUN: kiln-opt %s --pass kiln-guard-run-time-shapes | FileCheck %s

// A dynamic operand whose result is static: the operand's run-time size must give the
// result's (reshape keeps the element count, pad adds its edges, broadcast maps 1 or equal).
// CHECK-DAG: func.func private @kiln_runtime_check_failed(i64, i64)

// CHECK-LABEL: func.func @reshape
// CHECK: tensor.dim %arg0, %c0
// CHECK: arith.cmpi ne, %{{.*}}, %c8_i64
// CHECK: scf.if
// CHECK: func.call @kiln_runtime_check_failed
// CHECK: stablehlo.reshape
func.func @reshape(%x: tensor<?xf32>) -> tensor<2x4xf32> {
  %r = stablehlo.reshape %x : (tensor<?xf32>) -> tensor<2x4xf32>
  return %r : tensor<2x4xf32>
}

// CHECK-LABEL: func.func @pad
// CHECK: tensor.dim %arg0
// CHECK: arith.cmpi ne, %{{.*}}, %c10_i64
// CHECK: scf.if
// CHECK: stablehlo.pad
func.func @pad(%x: tensor<?xf32>, %z: tensor<f32>) -> tensor<10xf32> {
  %r = stablehlo.pad %x, %z, low = [1], high = [1], interior = [0] : (tensor<?xf32>, tensor<f32>) -> tensor<10xf32>
  return %r : tensor<10xf32>
}

// CHECK-LABEL: func.func @broadcast
// CHECK: tensor.dim %arg0
// CHECK: arith.cmpi ne, %{{.*}}, %c1_i64
// CHECK: arith.cmpi ne, %{{.*}}, %c8_i64
// CHECK: scf.if
// CHECK: stablehlo.broadcast_in_dim
func.func @broadcast(%x: tensor<?xf32>) -> tensor<4x8xf32> {
  %r = stablehlo.broadcast_in_dim %x, dims = [1] : (tensor<?xf32>) -> tensor<4x8xf32>
  return %r : tensor<4x8xf32>
}

// The inputs of a reduce have one shape: compared with each other.
// CHECK-LABEL: func.func @reduce_two
// CHECK: tensor.dim %arg0
// CHECK: tensor.dim %arg1
// CHECK: arith.cmpi ne
// CHECK: scf.if
// CHECK: stablehlo.reduce
func.func @reduce_two(%x: tensor<?xf32>, %y: tensor<?xf32>, %z: tensor<f32>) -> (tensor<f32>, tensor<f32>) {
  %r:2 = stablehlo.reduce(%x init: %z), (%y init: %z) across dimensions = [0] : (tensor<?xf32>, tensor<?xf32>, tensor<f32>, tensor<f32>) -> (tensor<f32>, tensor<f32>)
   reducer(%a: tensor<f32>, %u: tensor<f32>) (%b: tensor<f32>, %v: tensor<f32>) {
    %0 = stablehlo.add %a, %u : tensor<f32>
    %1 = stablehlo.add %b, %v : tensor<f32>
    stablehlo.return %0, %1 : tensor<f32>, tensor<f32>
  }
  return %r#0, %r#1 : tensor<f32>, tensor<f32>
}

// All static: nothing.
// CHECK-LABEL: func.func @static
// CHECK-NOT: tensor.dim
// CHECK-NOT: scf.if
// CHECK: stablehlo.reshape
func.func @static(%x: tensor<8xf32>) -> tensor<2x4xf32> {
  %r = stablehlo.reshape %x : (tensor<8xf32>) -> tensor<2x4xf32>
  return %r : tensor<2x4xf32>
}
