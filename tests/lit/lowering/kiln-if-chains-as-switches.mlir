// RUN: kiln-opt %s --pass kiln-if-chains-as-switches --split-input-file | FileCheck %s
// RUN: kiln-opt %s --pass-pipeline 'builtin.module(kiln-switches-as-ifs,one-shot-bufferize{bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map},kiln-if-chains-as-switches)' --split-input-file | FileCheck %s --check-prefix=ROUND

// A chain as kiln-switches-as-ifs leaves it once bufferized: one switch again, the case
// blocks in the order of the mark's case values, the innermost else as the default; the
// chain's comparisons and constants are gone, the mark too.
// CHECK-LABEL: func.func @chain
// CHECK-NOT: kiln.switch_chain
// CHECK-NOT: arith.cmpi
// CHECK-NOT: scf.if
// CHECK: %[[R:.*]] = scf.index_switch %arg1 -> memref<2xf32>
// CHECK-NEXT: case 3 {
// CHECK:   math.absf
// CHECK-NEXT:   scf.yield
// CHECK-NEXT: }
// CHECK-NEXT: case 7 {
// CHECK:   math.exp
// CHECK-NEXT:   scf.yield
// CHECK-NEXT: }
// CHECK-NEXT: case 1 {
// CHECK:   math.sqrt
// CHECK-NEXT:   scf.yield
// CHECK-NEXT: }
// CHECK-NEXT: default {
// CHECK-NEXT:   scf.yield %arg0 : memref<2xf32>
// CHECK: return %[[R]]
// The same from tensors: kiln-switches-as-ifs, One-Shot Bufferize, then this pass.
// ROUND-LABEL: func.func @chain
// ROUND-NOT: scf.if
// ROUND: scf.index_switch %arg1 -> memref<2xf32>
// ROUND-NEXT: case 3 {
// ROUND: case 7 {
// ROUND: case 1 {
// ROUND: default {
func.func @chain(%x: memref<2xf32>, %i: index) -> memref<2xf32> {
  %c3 = arith.constant 3 : index
  %is3 = arith.cmpi eq, %i, %c3 {kiln.switch_chain = array<i64: 3, 7, 1>} : index
  %r = scf.if %is3 -> (memref<2xf32>) {
    %a = memref.alloc() : memref<2xf32>
    linalg.map { math.absf } ins(%x : memref<2xf32>) outs(%a : memref<2xf32>)
    scf.yield %a : memref<2xf32>
  } else {
    %c7 = arith.constant 7 : index
    %is7 = arith.cmpi eq, %i, %c7 : index
    %r7 = scf.if %is7 -> (memref<2xf32>) {
      %e = memref.alloc() : memref<2xf32>
      linalg.map { math.exp } ins(%x : memref<2xf32>) outs(%e : memref<2xf32>)
      scf.yield %e : memref<2xf32>
    } else {
      %c1 = arith.constant 1 : index
      %is1 = arith.cmpi eq, %i, %c1 : index
      %r1 = scf.if %is1 -> (memref<2xf32>) {
        %s = memref.alloc() : memref<2xf32>
        linalg.map { math.sqrt } ins(%x : memref<2xf32>) outs(%s : memref<2xf32>)
        scf.yield %s : memref<2xf32>
      } else {
        scf.yield %x : memref<2xf32>
      }
      scf.yield %r1 : memref<2xf32>
    }
    scf.yield %r7 : memref<2xf32>
  }
  return %r : memref<2xf32>
}

// -----

// Work between two levels runs for every later case: not a switch any more. The chain stays
// (correct, only one predicate a case on the GPU); the mark goes.
// CHECK-LABEL: func.func @reshaped
// CHECK-NOT: scf.index_switch
// CHECK-NOT: kiln.switch_chain
// CHECK: scf.if
// CHECK: memref.copy
// CHECK: scf.if
func.func @reshaped(%x: memref<2xf32>, %y: memref<2xf32>, %i: index) -> memref<2xf32> {
  %c0 = arith.constant 0 : index
  %is0 = arith.cmpi eq, %i, %c0 {kiln.switch_chain = array<i64: 0, 1>} : index
  %r = scf.if %is0 -> (memref<2xf32>) {
    scf.yield %x : memref<2xf32>
  } else {
    memref.copy %x, %y : memref<2xf32> to memref<2xf32>
    %c1 = arith.constant 1 : index
    %is1 = arith.cmpi eq, %i, %c1 : index
    %r1 = scf.if %is1 -> (memref<2xf32>) {
      scf.yield %y : memref<2xf32>
    } else {
      scf.yield %x : memref<2xf32>
    }
    scf.yield %r1 : memref<2xf32>
  }
  return %r : memref<2xf32>
}

// -----

// A level that no longer compares with its case value (here 5, the mark says 1): left alone.
// CHECK-LABEL: func.func @other_case
// CHECK-NOT: scf.index_switch
// CHECK-NOT: kiln.switch_chain
// CHECK: arith.constant 5 : index
// CHECK: scf.if
func.func @other_case(%x: memref<2xf32>, %y: memref<2xf32>, %i: index) -> memref<2xf32> {
  %c0 = arith.constant 0 : index
  %is0 = arith.cmpi eq, %i, %c0 {kiln.switch_chain = array<i64: 0, 1>} : index
  %r = scf.if %is0 -> (memref<2xf32>) {
    scf.yield %x : memref<2xf32>
  } else {
    %c5 = arith.constant 5 : index
    %is5 = arith.cmpi eq, %i, %c5 : index
    %r1 = scf.if %is5 -> (memref<2xf32>) {
      scf.yield %y : memref<2xf32>
    } else {
      scf.yield %x : memref<2xf32>
    }
    scf.yield %r1 : memref<2xf32>
  }
  return %r : memref<2xf32>
}

// -----

// An unmarked chain (written by hand, not by kiln-switches-as-ifs) is not touched.
// CHECK-LABEL: func.func @unmarked
// CHECK-NOT: scf.index_switch
// CHECK: arith.cmpi eq
// CHECK: scf.if
func.func @unmarked(%x: memref<2xf32>, %y: memref<2xf32>, %i: index) -> memref<2xf32> {
  %c0 = arith.constant 0 : index
  %is0 = arith.cmpi eq, %i, %c0 : index
  %r = scf.if %is0 -> (memref<2xf32>) {
    scf.yield %x : memref<2xf32>
  } else {
    scf.yield %y : memref<2xf32>
  }
  return %r : memref<2xf32>
}

// -----

// Switches nested in a case and in the default: each chain back to its own switch.
// ROUND-LABEL: func.func @nested
// ROUND-NOT: scf.if
// ROUND: scf.index_switch %arg1 -> memref<2xf32>
// ROUND-NEXT: case 0 {
// ROUND-NEXT:   scf.index_switch %arg2 -> memref<2xf32>
// ROUND-NEXT:   case 4 {
// ROUND: case 2 {
// ROUND: default {
// ROUND-NEXT:   scf.index_switch %arg2 -> memref<2xf32>
// ROUND-NEXT:   case 1 {
// ROUND: case 5 {
// ROUND-NOT: scf.if
// ROUND: return
func.func @nested(%x: tensor<2xf32>, %i: index, %j: index) -> tensor<2xf32> {
  %c0 = arith.constant 0 : index
  %r = scf.index_switch %i -> tensor<2xf32>
  case 0 {
    %in = scf.index_switch %j -> tensor<2xf32>
    case 4 {
      %v = arith.constant 4.0 : f32
      %t = tensor.insert %v into %x[%c0] : tensor<2xf32>
      scf.yield %t : tensor<2xf32>
    }
    default {
      scf.yield %x : tensor<2xf32>
    }
    scf.yield %in : tensor<2xf32>
  }
  case 2 {
    %v = arith.constant 2.0 : f32
    %t = tensor.insert %v into %x[%c0] : tensor<2xf32>
    scf.yield %t : tensor<2xf32>
  }
  default {
    %in = scf.index_switch %j -> tensor<2xf32>
    case 1 {
      %v = arith.constant 1.0 : f32
      %t = tensor.insert %v into %x[%c0] : tensor<2xf32>
      scf.yield %t : tensor<2xf32>
    }
    case 5 {
      %v = arith.constant 5.0 : f32
      %t = tensor.insert %v into %x[%c0] : tensor<2xf32>
      scf.yield %t : tensor<2xf32>
    }
    default {
      scf.yield %x : tensor<2xf32>
    }
    scf.yield %in : tensor<2xf32>
  }
  return %r : tensor<2xf32>
}
