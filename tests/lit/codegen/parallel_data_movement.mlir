// RUN: kiln-opt %s --pass kiln-parallelize --split-input-file | FileCheck %s

// A row gather: the body loads from the index buffer and the table, memrefs from outside
// the op. Both travel in the context after the operand (slots 1 and 2), are rebuilt in the
// outlined body, and their loads are marked read-only for kiln-hoist-invariant-loads.
// `linalg.index 0` counts rows of the chunk, so the body adds the chunk's first row.
// CHECK-LABEL: func.func @gather
// CHECK: memref.alloca() : memref<3xi64>
// CHECK: call @kiln_parallel_for
// CHECK-LABEL: func.func private @kiln_parallel_body_0
// CHECK: %[[B:.*]] = arith.index_cast %arg1 : i64 to index
// CHECK: llvm.getelementptr %arg0[1]
// CHECK: llvm.getelementptr %arg0[2]
// CHECK: linalg.generic
// CHECK: %[[I:.*]] = linalg.index 0 : index
// CHECK-NEXT: %[[G:.*]] = arith.addi %[[I]], %[[B]] : index
// CHECK: memref.load %{{.*}}[%[[G]], %c0] {kiln.read_only}
// CHECK: memref.load %{{.*}} {kiln.read_only}
func.func @gather(%table: memref<100000x128xf32>, %idx: memref<65536x1xi32>, %out: memref<65536x128xf32>) {
  %c0 = arith.constant 0 : index
  %c99999 = arith.constant 99999 : index
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} outs(%out : memref<65536x128xf32>) {
  ^bb0(%o: f32):
    %r = linalg.index 0 : index
    %c = linalg.index 1 : index
    %i = memref.load %idx[%r, %c0] : memref<65536x1xi32>
    %j = arith.index_cast %i : i32 to index
    %k = arith.maxsi %j, %c0 : index
    %l = arith.minsi %k, %c99999 : index
    %v = memref.load %table[%l, %c] : memref<100000x128xf32>
    linalg.yield %v : f32
  }
  return
}

// -----

// A scalar computed outside the op (a pad value loaded from a buffer) travels as its bits
// in a 64-bit slot: f32 -> i32 -> i64 at the call, back in the body.
// CHECK-LABEL: func.func @fill_with_loaded_value
// CHECK: %[[V:.*]] = memref.load %arg0[] : memref<f32>
// CHECK: %[[BITS:.*]] = arith.bitcast %[[V]] : f32 to i32
// CHECK: arith.extui %[[BITS]] : i32 to i64
// CHECK: call @kiln_parallel_for
// CHECK-LABEL: func.func private @kiln_parallel_body_0
// CHECK: %[[S:.*]] = llvm.load %{{.*}} : !llvm.ptr -> i64
// CHECK: %[[T:.*]] = arith.trunci %[[S]] : i64 to i32
// CHECK: %[[F:.*]] = arith.bitcast %[[T]] : i32 to f32
// CHECK: linalg.yield %[[F]] : f32
func.func @fill_with_loaded_value(%v: memref<f32>, %out: memref<1024x1024xf32>) {
  %x = memref.load %v[] : memref<f32>
  linalg.fill ins(%x : f32) outs(%out : memref<1024x1024xf32>)
  return
}

// -----

// A large strided copy (a pad's interior, a slice) becomes an identity generic and is split
// like any elementwise op.
// CHECK-LABEL: func.func @strided_copy
// CHECK-NOT: memref.copy
// CHECK: call @kiln_parallel_for
// CHECK-LABEL: func.func private @kiln_parallel_body_0
// CHECK: memref.subview {{.*}} to memref<?x1024xf32, strided<[2052, 1], offset: ?>>
// CHECK: linalg.generic
func.func @strided_copy(%x: memref<1024x1024xf32>, %y: memref<1026x2052xf32>) {
  %s = memref.subview %y[1, 2] [1024, 1024] [1, 1] : memref<1026x2052xf32> to memref<1024x1024xf32, strided<[2052, 1], offset: 2054>>
  memref.copy %x, %s : memref<1024x1024xf32> to memref<1024x1024xf32, strided<[2052, 1], offset: 2054>>
  return
}

// -----

// A window sum (reduce_window): its 3x3 window is unrolled into the body (windows.py), one
// load of the input per window position added in the original order onto the output
// element, so the op has output dims only; it splits along d0, the batch, and the input is
// a captured, read-only memref.
// CHECK-LABEL: func.func @window_sum
// CHECK: memref.alloca() : memref<2xi64>
// CHECK: call @kiln_parallel_for(%{{.*}}, %{{.*}}, %c8_i64)
// CHECK-LABEL: func.func private @kiln_parallel_body_0
// CHECK: memref.subview {{.*}} to memref<?x112x112x64xf32
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "parallel", "parallel"]
// CHECK: ^bb0(%[[OUT:.*]]: f32):
// CHECK: %[[X0:.*]] = memref.load {{.*}} {kiln.read_only}
// CHECK-NEXT: %[[S0:.*]] = arith.addf %[[OUT]], %[[X0]] : f32
// CHECK-COUNT-8: arith.addf
// CHECK-NOT: arith.addf
// CHECK: linalg.yield
func.func @window_sum(%x: memref<8x114x114x64xf32>, %w: memref<3x3xf32>, %o: memref<8x112x112x64xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1 + d4, d2 + d5, d3)>, affine_map<(d0, d1, d2, d3, d4, d5) -> (d4, d5)>, affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction"]} ins(%x, %w : memref<8x114x114x64xf32>, memref<3x3xf32>) outs(%o : memref<8x112x112x64xf32>) {
  ^bb0(%in: f32, %unused: f32, %acc: f32):
    %s = arith.addf %acc, %in : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// The body reads the buffer the op writes (at other positions): chunks would race, so the
// op stays serial.
// CHECK-LABEL: func.func @reads_its_output
// CHECK-NOT: kiln_parallel_for
// CHECK: linalg.generic
func.func @reads_its_output(%out: memref<1024x1024xf32>) {
  %c0 = arith.constant 0 : index
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} outs(%out : memref<1024x1024xf32>) {
  ^bb0(%o: f32):
    %c = linalg.index 1 : index
    %v = memref.load %out[%c0, %c] : memref<1024x1024xf32>
    linalg.yield %v : f32
  }
  return
}

// -----

// A 5x5 window (25 positions) stays a loop over the window, as does a convolution (its
// channel reduction is a plain index of its input): both still split along the batch.
// CHECK-LABEL: func.func private @kiln_parallel_body_0
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction"]
// CHECK-LABEL: func.func private @kiln_parallel_body_1
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]
func.func @big_window(%x: memref<8x116x116x64xf32>, %w: memref<5x5xf32>, %o: memref<8x112x112x64xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1 + d4, d2 + d5, d3)>, affine_map<(d0, d1, d2, d3, d4, d5) -> (d4, d5)>, affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction"]} ins(%x, %w : memref<8x116x116x64xf32>, memref<5x5xf32>) outs(%o : memref<8x112x112x64xf32>) {
  ^bb0(%in: f32, %unused: f32, %acc: f32):
    %s = arith.maximumf %acc, %in : f32
    linalg.yield %s : f32
  }
  return
}

func.func @conv(%x: memref<8x58x58x8xf32>, %f: memref<3x3x8x16xf32>, %o: memref<8x56x56x16xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d0, d1 + d4, d2 + d5, d6)>, affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d4, d5, d6, d3)>, affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]} ins(%x, %f : memref<8x58x58x8xf32>, memref<3x3x8x16xf32>) outs(%o : memref<8x56x56x16xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  return
}
