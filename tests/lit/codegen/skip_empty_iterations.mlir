// RUN: kiln-opt %s --pass kiln-skip-empty-iterations | FileCheck %s

// Fuzz finding F5: a linalg op over a run-time shape [a, 0] still looped a times. Each op
// with a run-time dimension runs under scf.if on every such dimension being non-zero.

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#scalar = affine_map<(d0, d1) -> ()>

// CHECK-LABEL: func.func @iota_then_sum
// CHECK: %[[D0:.*]] = memref.dim %arg0, %c0
// CHECK: arith.cmpi ne, %[[D0]], %c0
// CHECK: %[[D1:.*]] = memref.dim %arg0, %c1
// CHECK: arith.cmpi ne, %[[D1]], %c0
// CHECK: %[[ALL:.*]] = arith.andi
// CHECK: scf.if %[[ALL]] {
// CHECK-NEXT: linalg.generic
// CHECK: scf.if
// CHECK-NEXT: linalg.generic {{.*}}iterator_types = ["reduction", "reduction"]
func.func @iota_then_sum(%buf: memref<?x?xf32>, %out: memref<f32>) {
  linalg.generic {indexing_maps = [#id], iterator_types = ["parallel", "parallel"]} outs(%buf : memref<?x?xf32>) {
  ^bb0(%o: f32):
    %i = linalg.index 0 : index
    %c = arith.index_cast %i : index to i32
    %f = arith.sitofp %c : i32 to f32
    linalg.yield %f : f32
  }
  linalg.generic {indexing_maps = [#id, #scalar], iterator_types = ["reduction", "reduction"]} ins(%buf : memref<?x?xf32>) outs(%out : memref<f32>) {
  ^bb0(%in: f32, %acc: f32):
    %s = arith.addf %acc, %in : f32
    linalg.yield %s : f32
  }
  return
}

// A reduction into a run-time row count tests the input's dimensions too: [a, 0] -> [a]
// is an empty iteration space (the init was filled by an op of its own).
// CHECK-LABEL: func.func @rows
// CHECK: scf.if
// CHECK-NEXT: linalg.fill
// CHECK: scf.if
// CHECK-NEXT: linalg.reduce
func.func @rows(%x: memref<?x?xf32>, %out: memref<?xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%out : memref<?xf32>)
  linalg.reduce ins(%x : memref<?x?xf32>) outs(%out : memref<?xf32>) dimensions = [1]
    (%in: f32, %acc: f32) {
      %s = arith.addf %acc, %in : f32
      linalg.yield %s : f32
    }
  return
}

// A static zero next to a run-time size: the op has no iteration at all and is dropped.
// CHECK-LABEL: func.func @static_zero
// CHECK-NOT: linalg.fill
// CHECK: return
func.func @static_zero(%buf: memref<?x0xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%buf : memref<?x0xf32>)
  return
}

// Static shapes are left exactly as they were: no test, no branch.
// CHECK-LABEL: func.func @static
// CHECK-NOT: scf.if
// CHECK: linalg.fill
// CHECK-NOT: scf.if
// CHECK: return
func.func @static(%buf: memref<4x8xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%buf : memref<4x8xf32>)
  return
}

// An operand indexed by a constant (not a projected permutation) is not used for the test;
// the output still is.
// CHECK-LABEL: func.func @constant_index
// CHECK: memref.dim %arg1
// CHECK-NOT: memref.dim %arg0
// CHECK: scf.if
// CHECK-NEXT: linalg.generic
func.func @constant_index(%x: memref<?xf32>, %out: memref<?x?xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (0)>, #id], iterator_types = ["parallel", "parallel"]} ins(%x : memref<?xf32>) outs(%out : memref<?x?xf32>) {
  ^bb0(%in: f32, %o: f32):
    linalg.yield %in : f32
  }
  return
}
