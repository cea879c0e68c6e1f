// RUN: not kiln-opt --split-input-file %s 2>&1 | FileCheck %s

// Each check op is verified once, by the dialect (dialects/check.py); errors are located (kiln-opt numbers the lines of a split
// chunk from the chunk's start, so only the first chunk's line is checked exactly).

func.func @main(%a: tensor<2xf32>) {
  // CHECK: check_verify.mlir:[[# @LINE + 1]]:3: cannot parse MLIR: 'check.expect_eq' op takes 2 tensor operand(s) and has no results
  "check.expect_eq"(%a) : (tensor<2xf32>) -> ()
  func.return
}

// -----
func.func @main(%a: tensor<2xf32>, %b: tensor<2xf64>) {
  // CHECK: check_verify.mlir:{{[0-9]+}}:3: cannot parse MLIR: 'check.expect_eq' op compares tensors of different types: tensor<2xf32>, tensor<2xf64>
  check.expect_eq %a, %b : tensor<2xf32>, tensor<2xf64>
  func.return
}

// -----
func.func @main(%a: tensor<2xf32>, %b: tensor<3xf32>) {
  // CHECK: check_verify.mlir:{{[0-9]+}}:3: cannot parse MLIR: 'check.expect_close' op compares tensors of different shapes: tensor<2xf32>, tensor<3xf32>
  check.expect_close %a, %b : tensor<2xf32>, tensor<3xf32>
  func.return
}

// -----
func.func @main(%a: tensor<2xf32>) {
  // CHECK: check_verify.mlir:{{[0-9]+}}:3: cannot parse MLIR: 'check.expect_eq_const' op expects 'value' of type tensor<2xf32>, got tensor<2xi32>
  "check.expect_eq_const"(%a) {value = dense<[1, 2]> : tensor<2xi32>} : (tensor<2xf32>) -> ()
  func.return
}

// -----
func.func @main(%a: tensor<2xf32>) {
  // CHECK: check_verify.mlir:{{[0-9]+}}:3: cannot parse MLIR: 'check.expect_almost_eq_const' op requires attribute 'value'
  "check.expect_almost_eq_const"(%a) : (tensor<2xf32>) -> ()
  func.return
}

// -----
func.func @main(%a: tensor<2xf32>) {
  // CHECK: check_verify.mlir:{{[0-9]+}}:3: cannot parse MLIR: 'check.expect_almost_eq' op expects 'tolerance' to be a FloatAttr
  "check.expect_almost_eq"(%a, %a) {tolerance = 1 : i32} : (tensor<2xf32>, tensor<2xf32>) -> ()
  func.return
}

// -----
func.func @main(%a: tensor<2xf32>) {
  // CHECK: check_verify.mlir:{{[0-9]+}}:3: cannot parse MLIR: 'check.expect_serialized_eq' op attribute "probe_id" is expected but not provided
  "check.expect_serialized_eq"(%a) : (tensor<2xf32>) -> ()
  func.return
}

// -----
func.func @main(%a: tensor<2xf32>) {
  // CHECK: check_verify.mlir:{{[0-9]+}}:3: cannot read check op: unknown op 'check.expect_nothing' (the check dialect has
  check.expect_nothing %a : tensor<2xf32>
  func.return
}
