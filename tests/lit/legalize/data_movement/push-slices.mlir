// RUN: kiln-opt %s --pass kiln-push-slices-into-producers --split-input-file | FileCheck %s

// jnp.pad(concatenate(a, b))[::2, 1::3]: the slice moves through the pad (which shrinks to
// the kept border) and then into each piece of the concatenation.
// CHECK-LABEL: func.func @concat_pad_slice
// CHECK-DAG: %[[A:.*]] = stablehlo.slice %arg0 [1:2048:2, 2:1023:3]
// CHECK-DAG: %[[B:.*]] = stablehlo.slice %arg1 [1:2048:2, 1:1022:3]
// CHECK: %[[C:.*]] = stablehlo.concatenate %[[A]], %[[B]], dim = 1 : (tensor<1024x341xf32>, tensor<1024x341xf32>) -> tensor<1024x682xf32>
// CHECK: stablehlo.pad %[[C]], %{{.*}}, low = [1, 1], high = [0, 1], interior = [0, 0] : (tensor<1024x682xf32>, tensor<f32>) -> tensor<1025x684xf32>
// CHECK-NOT: stablehlo.slice
func.func @concat_pad_slice(%a: tensor<2048x1024xf32>, %b: tensor<2048x1024xf32>, %v: tensor<f32>) -> tensor<1025x684xf32> {
  %0 = stablehlo.concatenate %a, %b, dim = 1 : (tensor<2048x1024xf32>, tensor<2048x1024xf32>) -> tensor<2048x2048xf32>
  %1 = stablehlo.pad %0, %v, low = [1, 2], high = [1, 2], interior = [0, 0] : (tensor<2048x2048xf32>, tensor<f32>) -> tensor<2050x2052xf32>
  %2 = stablehlo.slice %1 [0:2050:2, 1:2052:3] : (tensor<2050x2052xf32>) -> tensor<1025x684xf32>
  return %2 : tensor<1025x684xf32>
}

// -----

// A slice that skips a whole piece drops it; one piece left needs no concatenation.
// CHECK-LABEL: func.func @one_piece
// CHECK: %[[S:.*]] = stablehlo.slice %arg1 [0:3, 1:4:2] : (tensor<3x6xi32>) -> tensor<3x2xi32>
// CHECK-NEXT: return %[[S]]
func.func @one_piece(%a: tensor<3x4xi32>, %b: tensor<3x6xi32>) -> tensor<3x2xi32> {
  %0 = stablehlo.concatenate %a, %b, dim = 1 : (tensor<3x4xi32>, tensor<3x6xi32>) -> tensor<3x10xi32>
  %1 = stablehlo.slice %0 [0:3, 5:9:2] : (tensor<3x10xi32>) -> tensor<3x2xi32>
  return %1 : tensor<3x2xi32>
}

// -----

// Left alone: interior padding, a producer with another user, a slice of padding only.
// CHECK-LABEL: func.func @left_alone
// CHECK: %[[P:.*]] = stablehlo.pad %arg0, %arg1, low = [0], high = [0], interior = [1]
// CHECK: stablehlo.slice %[[P]] [1:7:2]
// CHECK: %[[Q:.*]] = stablehlo.pad %arg0, %arg1, low = [2], high = [0], interior = [0]
// CHECK: stablehlo.slice %[[Q]] [0:4]
// CHECK: %[[R:.*]] = stablehlo.pad %arg0, %arg1, low = [6], high = [0], interior = [0]
// CHECK: stablehlo.slice %[[R]] [0:5:2]
func.func @left_alone(%x: tensor<4xf32>, %v: tensor<f32>) -> (tensor<3xf32>, tensor<4xf32>, tensor<6xf32>, tensor<3xf32>) {
  %0 = stablehlo.pad %x, %v, low = [0], high = [0], interior = [1] : (tensor<4xf32>, tensor<f32>) -> tensor<7xf32>
  %1 = stablehlo.slice %0 [1:7:2] : (tensor<7xf32>) -> tensor<3xf32>
  %2 = stablehlo.pad %x, %v, low = [2], high = [0], interior = [0] : (tensor<4xf32>, tensor<f32>) -> tensor<6xf32>
  %3 = stablehlo.slice %2 [0:4] : (tensor<6xf32>) -> tensor<4xf32>
  %4 = stablehlo.pad %x, %v, low = [6], high = [0], interior = [0] : (tensor<4xf32>, tensor<f32>) -> tensor<10xf32>
  %5 = stablehlo.slice %4 [0:5:2] : (tensor<10xf32>) -> tensor<3xf32>
  return %1, %3, %2, %5 : tensor<3xf32>, tensor<4xf32>, tensor<6xf32>, tensor<3xf32>
}
