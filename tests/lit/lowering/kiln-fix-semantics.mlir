// RUN: kiln-opt %s --pass kiln-fix-semantics --split-input-file | FileCheck %s

// `add` on i1 is a logical or (upstream would emit an xor).
// CHECK-LABEL: func.func @main
// CHECK-NOT: stablehlo.add
// CHECK: stablehlo.or
func.func @main(%a: tensor<4xi1>, %b: tensor<4xi1>) -> tensor<4xi1> {
  %0 = stablehlo.add %a, %b : tensor<4xi1>
  return %0 : tensor<4xi1>
}

// -----

// A float -> integer convert saturates: NaN -> 0, out-of-range values -> the bounds.
// CHECK-LABEL: func.func @main
// CHECK: %[[RAW:.*]] = stablehlo.convert %[[X:.*]] : (tensor<4xf32>) -> tensor<4xi8>
// CHECK: %[[LOW:.*]] = stablehlo.compare LE, %[[X]]
// CHECK: stablehlo.select %[[LOW]], %{{.*}}, %[[RAW]]
// CHECK: stablehlo.compare GE, %[[X]]
// CHECK: %[[NAN:.*]] = stablehlo.compare NE, %[[X]], %[[X]]
// CHECK: %[[OUT:.*]] = stablehlo.select %[[NAN]]
// CHECK: return %[[OUT]]
func.func @main(%a: tensor<4xf32>) -> tensor<4xi8> {
  %0 = stablehlo.convert %a : (tensor<4xf32>) -> tensor<4xi8>
  return %0 : tensor<4xi8>
}

// -----

// Ops whose upstream lowering is right are left alone.
// CHECK-LABEL: func.func @main
// CHECK-NEXT: stablehlo.add %{{.*}}, %{{.*}} : tensor<4xf32>
// CHECK-NEXT: return
func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.add %a, %a : tensor<4xf32>
  return %0 : tensor<4xf32>
}
