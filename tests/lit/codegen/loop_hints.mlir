// RUN: kiln-opt %s --pass kiln-loop-hints --split-input-file | FileCheck %s
// RUN: kiln-opt %s --pass kiln-loop-hints,convert-scf-to-cf,convert-cf-to-llvm --split-input-file | FileCheck %s --check-prefix=LLVM

// A block of 8 rows, each a long loop (kiln-fuse-rows' shape): the row loop is not
// unrolled, the long loop inside it is left to LLVM.
// CHECK-LABEL: func.func @rows
// CHECK: scf.for
// CHECK: scf.for
// CHECK: memref.store
// CHECK-NEXT: {{^ +\}$}}
// CHECK-NEXT: } {loop_annotation = #loop_annotation}
// The hint survives to LLVM's loop latch (llvm.br's own attribute), once.
// LLVM-LABEL: func.func @rows
// LLVM-COUNT-1: llvm.br {{.*}} {loop_annotation = #loop_annotation}
// LLVM-NOT: loop_annotation
// LLVM: return
func.func @rows(%m: memref<8x512xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %c512 = arith.constant 512 : index
  %one = arith.constant 1.0 : f32
  scf.for %i = %c0 to %c8 step %c1 {
    scf.for %j = %c0 to %c512 step %c1 {
      memref.store %one, %m[%i, %j] : memref<8x512xf32>
    }
  }
  return
}

// -----

// Every loop around a long one is marked, up to the function; a loop around a while loop
// (its trip count is the program's) or a loop of dynamic trip count too.
// CHECK-LABEL: func.func @nest
// CHECK-COUNT-3: } {loop_annotation = #loop_annotation}
// CHECK: return
func.func @nest(%m: memref<4x4x?xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %one = arith.constant 1.0 : f32
  scf.for %i = %c0 to %c4 step %c1 {
    scf.for %j = %c0 to %c4 step %c1 {
      scf.for %k = %c0 to %n step %c1 {
        memref.store %one, %m[%i, %j, %k] : memref<4x4x?xf32>
      }
    }
  }
  scf.for %i = %c0 to %c4 step %c1 {
    %r = scf.while (%x = %c0) : (index) -> index {
      %go = arith.cmpi slt, %x, %n : index
      scf.condition(%go) %x : index
    } do {
    ^bb0(%x: index):
      %y = arith.addi %x, %c1 : index
      scf.yield %y : index
    }
  }
  return
}

// -----

// Short constant loops (a 3x3 window) are LLVM's to unroll: nothing is marked, and
// innermost loops never are.
// CHECK-LABEL: func.func @window
// CHECK-NOT: loop_annotation
// CHECK: return
func.func @window(%in: memref<3x3xf32>, %out: memref<f32>, %big: memref<1024xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %c1024 = arith.constant 1024 : index
  scf.for %i = %c0 to %c3 step %c1 {
    scf.for %j = %c0 to %c3 step %c1 {
      %v = memref.load %in[%i, %j] : memref<3x3xf32>
      memref.store %v, %out[] : memref<f32>
    }
  }
  scf.for %i = %c0 to %c1024 step %c1 {
    %v = memref.load %big[%i] : memref<1024xf32>
    memref.store %v, %out[] : memref<f32>
  }
  return
}
