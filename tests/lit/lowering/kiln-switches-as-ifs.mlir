// RUN: kiln-opt %s --pass kiln-switches-as-ifs --split-input-file | FileCheck %s

// Three cases and a default: a chain, in the order of the case values; each branch's block
// moves over unchanged.
// CHECK-LABEL: func.func @chain
// CHECK-NOT: scf.index_switch
// CHECK: %[[C3:.*]] = arith.constant 3 : index
// CHECK: %[[IS3:.*]] = arith.cmpi eq, %arg1, %[[C3]] {kiln.switch_chain = array<i64: 3, 7, 1>} : index
// CHECK: %[[R:.*]] = scf.if %[[IS3]] -> (tensor<2xf32>) {
// CHECK:   arith.negf
// CHECK: } else {
// CHECK:   %[[C7:.*]] = arith.constant 7 : index
// CHECK:   %[[IS7:.*]] = arith.cmpi eq, %arg1, %[[C7]] : index
// CHECK:   %[[R7:.*]] = scf.if %[[IS7]] -> (tensor<2xf32>) {
// CHECK:     math.exp
// CHECK:   } else {
// CHECK:     %[[C1:.*]] = arith.constant 1 : index
// CHECK:     %[[IS1:.*]] = arith.cmpi eq, %arg1, %[[C1]] : index
// CHECK:     %[[R1:.*]] = scf.if %[[IS1]] -> (tensor<2xf32>) {
// CHECK:       math.sqrt
// CHECK:     } else {
// CHECK:       scf.yield %arg0 : tensor<2xf32>
// CHECK:     }
// CHECK:     scf.yield %[[R1]] : tensor<2xf32>
// CHECK:   }
// CHECK:   scf.yield %[[R7]] : tensor<2xf32>
// CHECK: }
// CHECK: return %[[R]]
func.func @chain(%x: tensor<2xf32>, %i: index) -> tensor<2xf32> {
  %r = scf.index_switch %i -> tensor<2xf32>
  case 3 {
    %a = math.absf %x : tensor<2xf32>
    %n = arith.negf %a : tensor<2xf32>
    scf.yield %n : tensor<2xf32>
  }
  case 7 {
    %e = math.exp %x : tensor<2xf32>
    scf.yield %e : tensor<2xf32>
  }
  case 1 {
    %s = math.sqrt %x : tensor<2xf32>
    scf.yield %s : tensor<2xf32>
  }
  default {
    scf.yield %x : tensor<2xf32>
  }
  return %r : tensor<2xf32>
}

// -----

// No cases: the default block, inlined.
// CHECK-LABEL: func.func @default_only
// CHECK-NOT: scf.
// CHECK: %[[N:.*]] = arith.negf %arg0
// CHECK: return %[[N]]
func.func @default_only(%x: tensor<2xf32>, %i: index) -> tensor<2xf32> {
  %r = scf.index_switch %i -> tensor<2xf32>
  default {
    %n = arith.negf %x : tensor<2xf32>
    scf.yield %n : tensor<2xf32>
  }
  return %r : tensor<2xf32>
}

// -----

// Without tensor results the switch bufferizes correctly: left alone.
// CHECK-LABEL: func.func @scalars
// CHECK: scf.index_switch
// CHECK-NOT: scf.if
func.func @scalars(%x: f32, %i: index) -> f32 {
  %r = scf.index_switch %i -> f32
  case 0 {
    %n = arith.negf %x : f32
    scf.yield %n : f32
  }
  default {
    scf.yield %x : f32
  }
  return %r : f32
}
