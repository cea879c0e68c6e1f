// RUN: not kiln-opt %s --pass kiln-layout-assignment --split-input-file 2> %t.err | FileCheck %s
// RUN: FileCheck %s --check-prefix=ERR < %t.err

// Each entry parameter and result gets the layout it asks for, written canonically; an
// explicit mhlo.layout_mode (JAX) becomes kiln.layout, "default" and "auto" stay the default.
// CHECK-LABEL: func.func @main
// CHECK-SAME: %{{.*}}: tensor<2x3xf32> {kiln.layout = "{0,1}"}
// CHECK-SAME: %{{.*}}: tensor<3x5xf32> {kiln.layout = "{1,0:T(2,128)}"}
// CHECK-SAME: %{{.*}}: tensor<4xf32> {mhlo.layout_mode = "default"}
// CHECK-SAME: -> (tensor<2x3xf32> {kiln.layout = "{0,1}"}, tensor<2x3xf32> {mhlo.layout_mode = "auto"})
// CHECK-NOT: mhlo.layout_mode = "{
// CHECK: stablehlo.add
func.func @main(%a: tensor<2x3xf32> {kiln.layout = "{0, 1}"},
                %b: tensor<3x5xf32> {kiln.layout = "{1,0:T(2,128)}"},
                %c: tensor<4xf32> {mhlo.layout_mode = "default"})
    -> (tensor<2x3xf32> {mhlo.layout_mode = "{0,1}"}, tensor<2x3xf32> {mhlo.layout_mode = "auto"}) {
  %0 = stablehlo.add %a, %a : tensor<2x3xf32>
  return %0, %0 : tensor<2x3xf32>, tensor<2x3xf32>
}

// -----

// A layout must order every dimension once.
// ERR: kiln-layout-assignment.mlir:[[# @LINE + 2]]:1: argument 0 of @main: layout {0} does not order the 2 dimensions of tensor<2x3xf32>
// CHECK: // -----
func.func @main(%a: tensor<2x3xf32> {kiln.layout = "{0}"}) -> tensor<2x3xf32> {
  return %a : tensor<2x3xf32>
}

// -----

// Tile padding depends on the sizes: a tiled layout needs a static shape.
// ERR: kiln-layout-assignment.mlir:[[# @LINE + 1]]:1: result 0 of @main: the tiled layout {0:T(8)} needs a static shape
func.func @main(%a: tensor<?xf32>) -> (tensor<?xf32> {kiln.layout = "{0:T(8)}"}) {
  return %a : tensor<?xf32>
}

// -----

// Layout text that does not parse.
// ERR: kiln-layout-assignment.mlir:[[# @LINE + 1]]:1: argument 0 of @main: bad layout '{1,0:Q(3)}': unknown layout attribute 'Q'
func.func @main(%a: tensor<2x3xf32> {kiln.layout = "{1,0:Q(3)}"}) -> tensor<2x3xf32> {
  return %a : tensor<2x3xf32>
}
