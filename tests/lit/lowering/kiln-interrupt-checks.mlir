// RUN: kiln-opt %s --pass kiln-interrupt-checks --split-input-file | FileCheck %s

// A while loop whose body is a few scalar instructions polls the runtime for Ctrl-C every
// 1024 iterations, counting them in a stack slot (LLVM keeps it in a register).
// CHECK: func.func private @kiln_check_interrupt
// CHECK-LABEL: func.func @main
// CHECK: %[[COUNT:[a-z0-9_]+]] = memref.alloca() : memref<i32>
// CHECK: memref.store %{{.*}}, %[[COUNT]][]
// CHECK: scf.while
// CHECK: do {
// CHECK: %[[OLD:[a-z0-9_]+]] = memref.load %[[COUNT]][]
// CHECK: %[[NEW:[a-z0-9_]+]] = arith.addi %[[OLD]]
// CHECK: memref.store %[[NEW]], %[[COUNT]][]
// CHECK: %[[LAP:[a-z0-9_]+]] = arith.andi %[[NEW]], %c1023_i32
// CHECK: %[[DUE:[a-z0-9_]+]] = arith.cmpi eq, %[[LAP]]
// CHECK: scf.if %[[DUE]] {
// CHECK-NEXT: call @kiln_check_interrupt
// CHECK-NEXT: }
// CHECK-NOT: kiln_check_interrupt
// CHECK: return
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
// CHECK: return
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

// -----

// A while loop with a loop inside polls on every iteration; so does the loop nest's outer
// loop, but not a loop of one iteration (linalg's loop over a unit dimension) nor the
// innermost loop.
// CHECK-LABEL: func.func @main
// CHECK: scf.while
// CHECK: do {
// CHECK-NEXT: ^bb0
// CHECK-NEXT: call @kiln_check_interrupt
// CHECK: scf.for %{{.*}} = %c0 to %c1 step %c1 {
// CHECK-NEXT: scf.for %{{.*}} = %c0 to %c4 step %c1 {
// CHECK-NEXT: call @kiln_check_interrupt
// CHECK-NEXT: scf.for
// CHECK-NOT: kiln_check_interrupt
// CHECK: return
func.func @main(%n: i32, %m: memref<1x4x512xf32>) -> i32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c512 = arith.constant 512 : index
  %z = arith.constant 0.0 : f32
  %i0 = arith.constant 0 : i32
  %i1 = arith.constant 1 : i32
  %0 = scf.while (%i = %i0) : (i32) -> i32 {
    %c = arith.cmpi slt, %i, %n : i32
    scf.condition(%c) %i : i32
  } do {
  ^bb0(%i: i32):
    scf.for %a = %c0 to %c1 step %c1 {
      scf.for %b = %c0 to %c4 step %c1 {
        scf.for %d = %c0 to %c512 step %c1 {
          memref.store %z, %m[%a, %b, %d] : memref<1x4x512xf32>
        }
      }
    }
    %next = arith.addi %i, %i1 : i32
    scf.yield %next : i32
  }
  return %0 : i32
}

// -----

// A loop whose iteration is a short inner loop (a grouped convolution's loop over groups, a
// vector of 8 channels each) does not poll: the call would cost as much as the work. The
// loop around it, with 64 x 8 iterations inside, does.
// CHECK-LABEL: func.func @main
// CHECK: scf.for %{{.*}} = %c0 to %c100 step %c1 {
// CHECK-NEXT: call @kiln_check_interrupt
// CHECK-NEXT: scf.for %{{.*}} = %c0 to %c64 step %c1 {
// CHECK-NOT: kiln_check_interrupt
// CHECK: return
func.func @main(%m: memref<100x64x8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %c64 = arith.constant 64 : index
  %c100 = arith.constant 100 : index
  %z = arith.constant 0.0 : f32
  scf.for %a = %c0 to %c100 step %c1 {
    scf.for %b = %c0 to %c64 step %c1 {
      scf.for %d = %c0 to %c8 step %c1 {
        memref.store %z, %m[%a, %b, %d] : memref<100x64x8xf32>
      }
    }
  }
  return
}
