// RUN: kiln-opt %s --pass kiln-guard-run-time-shapes | FileCheck %s

// Fuzz finding F5: a run-time shape with a size of 0 holds no bytes whatever its other sizes
// are, so the byte-count guard holds only when every size is non-zero ([2^62, 0] is a valid,
// empty result, not one too large).
// CHECK-LABEL: func.func @iota
// CHECK: %[[A:.*]] = tensor.extract %arg0[%c0]
// CHECK: %[[B:.*]] = tensor.extract %arg0[%c1]
// CHECK: arith.divsi
// CHECK: arith.cmpi sgt
// CHECK: %[[ANZ:.*]] = arith.cmpi ne, %[[A]], %[[ZERO:.*]] : i64
// CHECK: %[[BNZ:.*]] = arith.cmpi ne, %[[B]], %[[ZERO]] : i64
// CHECK: %[[NONEMPTY:.*]] = arith.andi %[[ANZ]], %[[BNZ]]
// CHECK: %[[ANY:.*]] = arith.ori
// CHECK: %[[BAD:.*]] = arith.andi %[[ANY]], %[[NONEMPTY]]
// CHECK: scf.if %[[BAD]]
// CHECK: stablehlo.dynamic_iota
func.func @iota(%n: tensor<2xi64>) -> tensor<?x?xf32> {
  %r = stablehlo.dynamic_iota %n, dim = 0 : (tensor<2xi64>) -> tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}
