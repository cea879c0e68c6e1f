// RUN: not kiln-opt --split-input-file %s 2>&1 | FileCheck %s

// Kiln's contexts allow no unregistered dialect: an unknown op is an error at its own
// position, naming the op, with a hint (kiln-opt numbers a split chunk's lines from its
// start, so only the first chunk's line is checked exactly).

func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {
  // CHECK: unknown_op.mlir:[[# @LINE + 1]]:8: cannot parse MLIR: unknown op 'foo.bar' (Kiln reads StableHLO
  %0 = "foo.bar"(%a) : (tensor<2xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----
func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {
  // CHECK: unknown_op.mlir:{{[0-9]+}}:8: cannot parse MLIR: unknown op 'foo.baz' (Kiln reads StableHLO
  %0 = foo.baz %a : tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----
func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {
  // CHECK: unknown_op.mlir:{{[0-9]+}}:8: cannot parse MLIR: unknown op 'kiln.region' (the 'kiln' dialect is Kiln's own and has no such op
  %0 = "kiln.region"(%a) : (tensor<2xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----
// CHECK: unknown_op.mlir:{{[0-9]+}}:1: cannot parse MLIR: unknown op 'sdy.mesh' (Shardy ('sdy') sharding annotations are dropped when read through jaxlib
sdy.mesh @mesh = <["x"=2]>
func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {
  return %a : tensor<2xf32>
}
