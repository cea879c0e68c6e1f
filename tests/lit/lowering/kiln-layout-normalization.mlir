// RUN: kiln-opt %s --pass kiln-layout-normalization --split-input-file | FileCheck %s

// A column-major ({0,1}) parameter and result become their physical row-major arrays: the
// body transposes in, computes row-major, and transposes out; kiln.layout says descending.
// CHECK-LABEL: func.func @main
// CHECK-SAME: (%[[A:[a-z0-9_]+]]: tensor<3x2xf32> {kiln.layout = "{1,0}"}) -> (tensor<3x2xf32> {kiln.layout = "{1,0}"})
// CHECK-NEXT: %[[L:[a-z0-9_]+]] = stablehlo.transpose %[[A]], dims = [1, 0] : (tensor<3x2xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: %[[N:[a-z0-9_]+]] = stablehlo.negate %[[L]] : tensor<2x3xf32>
// CHECK-NEXT: %[[P:[a-z0-9_]+]] = stablehlo.transpose %[[N]], dims = [1, 0] : (tensor<2x3xf32>) -> tensor<3x2xf32>
// CHECK-NEXT: return %[[P]] : tensor<3x2xf32>
func.func @main(%a: tensor<2x3xf32> {kiln.layout = "{0,1}"}) -> (tensor<2x3xf32> {kiln.layout = "{0,1}"}) {
  %0 = stablehlo.negate %a : tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// A tiled parameter (f32[3,5]{1,0:T(2,2)}: 2x3 tiles of 2x2, figure 1 of the tiled-layout
// document) arrives as its padded physical array; the logical value is untiled and sliced
// out of the padding. A tiled result is padded (with zeros: padding holds no particular
// value), split into tiles, and the tiles moved to the minor end. A tile spanning a whole
// dimension needs no transpose: f32[3,5]{1,0:T(2,128)} untiles with a reshape.
// CHECK-LABEL: func.func @main
// CHECK-SAME: (%[[A:[a-z0-9_]+]]: tensor<2x3x2x2xf32> {kiln.layout = "{3,2,1,0}"}, %[[B:[a-z0-9_]+]]: tensor<2x1x2x128xf32> {kiln.layout = "{3,2,1,0}"})
// CHECK-SAME: -> (tensor<3x2x2x2xf32> {kiln.layout = "{3,2,1,0}"}, tensor<3x5xf32>)
// CHECK-NEXT: %[[T:[a-z0-9_]+]] = stablehlo.transpose %[[A]], dims = [0, 2, 1, 3] : (tensor<2x3x2x2xf32>) -> tensor<2x2x3x2xf32>
// CHECK-NEXT: %[[R:[a-z0-9_]+]] = stablehlo.reshape %[[T]] : (tensor<2x2x3x2xf32>) -> tensor<4x6xf32>
// CHECK-NEXT: %[[L:[a-z0-9_]+]] = stablehlo.slice %[[R]] [0:3, 0:5] : (tensor<4x6xf32>) -> tensor<3x5xf32>
// CHECK-NEXT: %[[BR:[a-z0-9_]+]] = stablehlo.reshape %[[B]] : (tensor<2x1x2x128xf32>) -> tensor<4x128xf32>
// CHECK-NEXT: %[[BL:[a-z0-9_]+]] = stablehlo.slice %[[BR]] [0:3, 0:5] : (tensor<4x128xf32>) -> tensor<3x5xf32>
// CHECK-NEXT: %[[N:[a-z0-9_]+]] = stablehlo.negate %[[L]]
// CHECK-NEXT: %[[C:[a-z0-9_]+]] = stablehlo.transpose %[[N]], dims = [1, 0] : (tensor<3x5xf32>) -> tensor<5x3xf32>
// CHECK-NEXT: %[[Z:[a-z0-9_]+]] = stablehlo.constant dense<0.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[P:[a-z0-9_]+]] = stablehlo.pad %[[C]], %[[Z]], low = [0, 0], high = [1, 1], interior = [0, 0]
// CHECK-NEXT: %[[S:[a-z0-9_]+]] = stablehlo.reshape %[[P]] : (tensor<6x4xf32>) -> tensor<3x2x2x2xf32>
// CHECK-NEXT: %[[O:[a-z0-9_]+]] = stablehlo.transpose %[[S]], dims = [0, 2, 1, 3]
// CHECK-NEXT: return %[[O]], %[[BL]] : tensor<3x2x2x2xf32>, tensor<3x5xf32>
func.func @main(%a: tensor<3x5xf32> {kiln.layout = "{1,0:T(2,2)}"}, %b: tensor<3x5xf32> {kiln.layout = "{1,0:T(2,128)}"})
    -> (tensor<3x5xf32> {kiln.layout = "{0,1:T(2,2)}"}, tensor<3x5xf32>) {
  %0 = stablehlo.negate %a : tensor<3x5xf32>
  return %0, %b : tensor<3x5xf32>, tensor<3x5xf32>
}

// -----

// Layouts that store the array row-major change nothing: the default, a tile that only
// regroups whole rows, and an entry without layouts.
// CHECK-LABEL: func.func @main
// CHECK-SAME: (%{{.*}}: tensor<2x3xf32> {kiln.layout = "{1,0}"}, %{{.*}}: tensor<4x8xi32> {kiln.layout = "{1,0:T(1,8)}"}, %{{.*}}: tensor<2xi1>)
// CHECK-NEXT: return
func.func @main(%a: tensor<2x3xf32> {kiln.layout = "{1,0}"}, %b: tensor<4x8xi32> {kiln.layout = "{1,0:T(1,8)}"}, %c: tensor<2xi1>)
    -> (tensor<2x3xf32>, tensor<4x8xi32>, tensor<2xi1>) {
  return %a, %b, %c : tensor<2x3xf32>, tensor<4x8xi32>, tensor<2xi1>
}

// -----

// Tail padding (L(8)) and a combined dimension ('*' merges dims 0 and 1): the physical array
// is the flat, padded buffer. Integer, boolean and complex padding values are zeros too.
// CHECK-LABEL: func.func @main
// CHECK-SAME: (%[[A:[a-z0-9_]+]]: tensor<8xi8> {kiln.layout = "{0}"}, %[[B:[a-z0-9_]+]]: tensor<2x4xi1> {kiln.layout = "{1,0}"},
// CHECK-SAME: -> (tensor<2x2xcomplex<f32>> {kiln.layout = "{1,0}"})
// CHECK: stablehlo.slice %[[A]] [0:5]
// CHECK: stablehlo.reshape %{{.*}} : (tensor<6xi1>) -> tensor<2x3xi1>
// CHECK: stablehlo.constant dense<0.000000e+00> : tensor<f32>
// CHECK: stablehlo.complex
// CHECK: stablehlo.pad
func.func @main(%a: tensor<5xi8> {kiln.layout = "{0:L(8)}"}, %b: tensor<2x3xi1> {kiln.layout = "{1,0:T(*,4)}"},
                %c: tensor<3xcomplex<f32>>) -> (tensor<3xcomplex<f32>> {kiln.layout = "{0:T(2)}"}) {
  return %c : tensor<3xcomplex<f32>>
}

// -----

// Parameters whose layouts only permute keep dynamic sizes.
// CHECK-LABEL: func.func @main
// CHECK-SAME: (%[[A:[a-z0-9_]+]]: tensor<3x?xf32> {kiln.layout = "{1,0}"})
// CHECK-NEXT: stablehlo.transpose %[[A]], dims = [1, 0] : (tensor<3x?xf32>) -> tensor<?x3xf32>
func.func @main(%a: tensor<?x3xf32> {kiln.layout = "{0,1}"}) -> tensor<?x3xf32> {
  return %a : tensor<?x3xf32>
}
