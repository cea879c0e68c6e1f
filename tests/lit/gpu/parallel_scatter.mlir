// RUN: kiln-opt %s --pass kiln-gpu-parallel-scatter --split-input-file | FileCheck %s

// An add: one thread per update element (5 updates x a window of 3), each adding its
// update atomically into a copy of the operand, when its window lies inside the operand.
// CHECK-LABEL: func.func @add
// CHECK: %[[IDX:.*]] = stablehlo.convert %arg1 : (tensor<5x1xi32>) -> tensor<5x1xi64>
// CHECK: %[[COPY:.*]] = bufferization.alloc_tensor() copy(%arg0) : tensor<8x3xf32>
// CHECK: %[[BUF:.*]] = bufferization.to_buffer %[[COPY]] : tensor<8x3xf32> to memref<8x3xf32>
// CHECK: scf.parallel (%[[T:.*]]) = (%c0) to (%c15) step (%c1) {
// CHECK:   %[[W:.*]] = arith.remui %[[T]], %c3 : index
// CHECK:   %[[P:.*]] = arith.divui %[[T]], %c3 : index
// CHECK:   %[[E:.*]] = tensor.extract %[[IDX]][%[[P]], %c0] : tensor<5x1xi64>
// CHECK:   %[[ROW:.*]] = arith.index_cast %[[E]] : i64 to index
// CHECK:   arith.cmpi sge, %[[ROW]], %c0 : index
// CHECK:   arith.cmpi sle, %[[ROW]], %c7 : index
// CHECK:   scf.if
// CHECK:     %[[U:.*]] = tensor.extract %arg2[%[[P]], %[[W]]] : tensor<5x3xf32>
// CHECK:     memref.atomic_rmw addf %[[U]], %[[BUF]][%[[ROW]], %[[W]]] : (f32, memref<8x3xf32>) -> f32
// CHECK: %[[R:.*]] = bufferization.to_tensor %[[BUF]] restrict writable : memref<8x3xf32>
// CHECK-NOT: stablehlo.scatter
// CHECK: return %[[R]]
func.func @add(%x: tensor<8x3xf32>, %i: tensor<5x1xi32>, %u: tensor<5x3xf32>) -> tensor<8x3xf32> {
  %0 = "stablehlo.scatter"(%x, %i, %u) <{scatter_dimension_numbers = #stablehlo.scatter<
      update_window_dims = [1], inserted_window_dims = [0], scatter_dims_to_operand_dims = [0],
      index_vector_dim = 1>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %r = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %r : tensor<f32>
  }) : (tensor<8x3xf32>, tensor<5x1xi32>, tensor<5x3xf32>) -> tensor<8x3xf32>
  return %0 : tensor<8x3xf32>
}

// -----

// A float max propagates NaN (arith.maximumf), which no atomic does: a compare-and-swap
// loop. Unsigned integers are scattered as signless ones (maxu), with bitcasts around.
// CHECK-LABEL: func.func @max
// CHECK: memref.generic_atomic_rmw %{{.*}}[%{{.*}}] : memref<8xf32> {
// CHECK: ^bb0(%[[OLD:.*]]: f32):
// CHECK:   %[[M:.*]] = arith.maximumf %[[OLD]], %{{.*}} : f32
// CHECK:   memref.atomic_yield %[[M]] : f32
// CHECK: stablehlo.bitcast_convert %arg3 : (tensor<8xui32>) -> tensor<8xi32>
// CHECK: memref.atomic_rmw maxu
// CHECK: %[[R:.*]] = bufferization.to_tensor
// CHECK: stablehlo.bitcast_convert %[[R]] : (tensor<8xi32>) -> tensor<8xui32>
func.func @max(%x: tensor<8xf32>, %i: tensor<4x1xi64>, %u: tensor<4xf32>, %y: tensor<8xui32>, %v: tensor<4xui32>) -> (tensor<8xf32>, tensor<8xui32>) {
  %0 = "stablehlo.scatter"(%x, %i, %u) <{scatter_dimension_numbers = #stablehlo.scatter<
      inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %r = stablehlo.maximum %a, %b : tensor<f32>
    stablehlo.return %r : tensor<f32>
  }) : (tensor<8xf32>, tensor<4x1xi64>, tensor<4xf32>) -> tensor<8xf32>
  %1 = "stablehlo.scatter"(%y, %i, %v) <{scatter_dimension_numbers = #stablehlo.scatter<
      inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>}> ({
  ^bb0(%a: tensor<ui32>, %b: tensor<ui32>):
    %r = stablehlo.maximum %b, %a : tensor<ui32>
    stablehlo.return %r : tensor<ui32>
  }) : (tensor<8xui32>, tensor<4x1xi64>, tensor<4xui32>) -> tensor<8xui32>
  return %0, %1 : tensor<8xf32>, tensor<8xui32>
}

// -----

// Unique indices: each thread reads, combines with the op's own region (here a multiply,
// which has no atomic) and writes, with no atomic; the loop is marked for scalarization of
// the region's 0-d ops. A replacing combiner just stores the update.
// CHECK-LABEL: func.func @unique_and_replace
// CHECK: scf.parallel
// CHECK:   %[[OLD:.*]] = memref.load %[[B:.*]][%{{.*}}] : memref<8xf32>
// CHECK:   stablehlo.multiply
// CHECK:   memref.store %{{.*}}, %[[B]][%{{.*}}] : memref<8xf32>
// CHECK: } {kiln.scalarize}
// CHECK: scf.parallel
// CHECK-NOT: memref.load
// CHECK:   %[[U:.*]] = tensor.extract %arg2
// CHECK:   memref.store %[[U]], %{{.*}}[%{{.*}}] : memref<8xf32>
func.func @unique_and_replace(%x: tensor<8xf32>, %i: tensor<4x1xi64>, %u: tensor<4xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %0 = "stablehlo.scatter"(%x, %i, %u) <{scatter_dimension_numbers = #stablehlo.scatter<
      inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>,
      unique_indices = true}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %r = stablehlo.multiply %a, %b : tensor<f32>
    stablehlo.return %r : tensor<f32>
  }) : (tensor<8xf32>, tensor<4x1xi64>, tensor<4xf32>) -> tensor<8xf32>
  %1 = "stablehlo.scatter"(%x, %i, %u) <{scatter_dimension_numbers = #stablehlo.scatter<
      inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    stablehlo.return %b : tensor<f32>
  }) : (tensor<8xf32>, tensor<4x1xi64>, tensor<4xf32>) -> tensor<8xf32>
  return %0, %1 : tensor<8xf32>, tensor<8xf32>
}

// -----

// What stays serial: a multiply with possibly repeated indices (order matters for
// rounding), 16-bit elements (no atomic add of their own), two operands at once.
// CHECK-LABEL: func.func @serial
// CHECK-NOT: scf.parallel
// CHECK: stablehlo.scatter
// CHECK: stablehlo.scatter
// CHECK: stablehlo.scatter
// CHECK-NOT: scf.parallel
func.func @serial(%x: tensor<8xf32>, %i: tensor<4x1xi64>, %u: tensor<4xf32>, %h: tensor<8xf16>, %v: tensor<4xf16>) -> (tensor<8xf32>, tensor<8xf16>, tensor<8xf32>, tensor<8xf32>) {
  %0 = "stablehlo.scatter"(%x, %i, %u) <{scatter_dimension_numbers = #stablehlo.scatter<
      inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %r = stablehlo.multiply %a, %b : tensor<f32>
    stablehlo.return %r : tensor<f32>
  }) : (tensor<8xf32>, tensor<4x1xi64>, tensor<4xf32>) -> tensor<8xf32>
  %1 = "stablehlo.scatter"(%h, %i, %v) <{scatter_dimension_numbers = #stablehlo.scatter<
      inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>}> ({
  ^bb0(%a: tensor<f16>, %b: tensor<f16>):
    %r = stablehlo.add %a, %b : tensor<f16>
    stablehlo.return %r : tensor<f16>
  }) : (tensor<8xf16>, tensor<4x1xi64>, tensor<4xf16>) -> tensor<8xf16>
  %2:2 = "stablehlo.scatter"(%x, %x, %i, %u, %u) <{scatter_dimension_numbers = #stablehlo.scatter<
      inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>, %c: tensor<f32>, %d: tensor<f32>):
    stablehlo.return %c, %d : tensor<f32>, tensor<f32>
  }) : (tensor<8xf32>, tensor<8xf32>, tensor<4x1xi64>, tensor<4xf32>, tensor<4xf32>) -> (tensor<8xf32>, tensor<8xf32>)
  return %0, %1, %2#0, %2#1 : tensor<8xf32>, tensor<8xf16>, tensor<8xf32>, tensor<8xf32>
}
