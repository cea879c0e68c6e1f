// RUN: kiln-opt %s --pass kiln-interrupt-checks --split-input-file | FileCheck %s

// A while loop polls the runtime for Ctrl-C at the top of its body.
// CHECK: func.func private @kiln_check_interrupt
// CHECK-LABEL: func.func @main
// CHECK: scf.while
// CHECK: do {
// CHECK: call @kiln_check_interrupt
func.func @main(%n: i32) -> i32 {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %0 = scf.while (%i = %c0) : (i32) -> i32 {
    %c = arith.cmpi slt, %i, %n : i32
    scf.condition(%c) %i : i32
  } do {
  ^bb0(%i: i32):
    %next = arith.addi %i, %c1 : i32
    scf.yield %next : i32
  }
  return %0 : i32
}

// -----

// An innermost for loop gets no poll, so that LLVM can still vectorize it.
// CHECK-LABEL: func.func @main
// CHECK-NOT: kiln_check_interrupt
func.func @main(%m: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %z = arith.constant 0.0 : f32
  scf.for %i = %c0 to %c8 step %c1 {
    memref.store %z, %m[%i] : memref<8xf32>
  }
  return
}
