// RUN: kiln-opt %s --pass kiln-hoist-invariant-loads --split-input-file | FileCheck %s

// A gathered row: the marked index load and its clamping leave the inner loop, which is
// then a plain row copy; the mark is dropped.
// CHECK-LABEL: func.func @row_copy
// CHECK: scf.for %[[R:.*]] = %c0 to %c64 step %c1 {
// CHECK-NEXT: %[[I:.*]] = memref.load %arg1[%[[R]], %c0] : memref<64x1xi32>
// CHECK-NEXT: %[[J:.*]] = arith.index_cast %[[I]] : i32 to index
// CHECK: scf.for
// CHECK-NEXT: memref.load %arg0
// CHECK-NEXT: memref.store
// CHECK-NOT: kiln.read_only
func.func @row_copy(%table: memref<100x128xf32>, %idx: memref<64x1xi32>, %out: memref<64x128xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %c128 = arith.constant 128 : index
  scf.for %r = %c0 to %c64 step %c1 {
    scf.for %c = %c0 to %c128 step %c1 {
      %i = memref.load %idx[%r, %c0] {kiln.read_only} : memref<64x1xi32>
      %j = arith.index_cast %i : i32 to index
      %v = memref.load %table[%j, %c] {kiln.read_only} : memref<100x128xf32>
      memref.store %v, %out[%r, %c] : memref<64x128xf32>
    }
  }
  return
}

// -----

// Unmarked loads stay (the store might change them), and so do marked loads under an
// scf.if (out of bounds on the branch not taken) or in a loop that may not run.
// CHECK-LABEL: func.func @stays
// CHECK: scf.for
// CHECK: scf.for
// CHECK-NEXT: memref.load %arg1[%{{.*}}, %c0] : memref<64x1xi32>
// CHECK: scf.if
// CHECK-NEXT: memref.load %arg1[%{{.*}}, %c1] : memref<64x1xi32>
// CHECK: scf.for %{{.*}} = %c0 to %arg3
// CHECK-NEXT: memref.load %arg1[%{{.*}}, %c0] : memref<64x1xi32>
func.func @stays(%table: memref<100x128xf32>, %idx: memref<64x1xi32>, %out: memref<64x128xf32>, %n: index, %p: i1) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %c128 = arith.constant 128 : index
  %f = arith.constant 0.0 : f32
  scf.for %r = %c0 to %c64 step %c1 {
    scf.for %c = %c0 to %c128 step %c1 {
      %i = memref.load %idx[%r, %c0] : memref<64x1xi32>
      %x = arith.sitofp %i : i32 to f32
      scf.if %p {
        %k = memref.load %idx[%r, %c1] {kiln.read_only} : memref<64x1xi32>
        %y = arith.sitofp %k : i32 to f32
        memref.store %y, %out[%r, %c] : memref<64x128xf32>
      }
      memref.store %x, %out[%r, %c] : memref<64x128xf32>
    }
    scf.for %c = %c0 to %n step %c1 {
      %i = memref.load %idx[%r, %c0] {kiln.read_only} : memref<64x1xi32>
      %x = arith.sitofp %i : i32 to f32
      memref.store %x, %out[%r, %c] : memref<64x128xf32>
    }
  }
  return
}
