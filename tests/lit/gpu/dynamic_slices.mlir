// RUN: kiln-opt %s --pass kiln-gpu-dynamic-slices --split-input-file | FileCheck %s

// A slice at a computed offset becomes a generic whose body recomputes the offset (the
// scalar code is copied in) and reads the element: the host never reads device memory.
// CHECK-LABEL: func.func @slice
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel"]} outs(%{{.*}} : tensor<4xf32>)
// CHECK:   %[[I:.*]] = linalg.index 0 : index
// CHECK:   %[[E:.*]] = tensor.extract %arg1[] : tensor<i64>
// CHECK:   %[[O:.*]] = arith.index_cast %[[E]] : i64 to index
// CHECK:   %[[J:.*]] = arith.addi %[[I]], %[[O]] : index
// CHECK:   tensor.extract %arg0[%[[J]]] : tensor<10xf32>
// CHECK-NOT: tensor.extract_slice
func.func @slice(%x: tensor<10xf32>, %at: tensor<i64>) -> tensor<4xf32> {
  %e = tensor.extract %at[] : tensor<i64>
  %o = arith.index_cast %e : i64 to index
  %s = tensor.extract_slice %x[%o] [4] [1] : tensor<10xf32> to tensor<4xf32>
  return %s : tensor<4xf32>
}

// -----

// An update at a computed offset: every element of the destination, the update's where
// the index falls inside the slice (its index clamped, so that no thread reads outside).
// CHECK-LABEL: func.func @update
// CHECK: linalg.generic {{.*}} ins(%arg0 : tensor<10xf32>) outs(%{{.*}} : tensor<10xf32>)
// CHECK: ^bb0(%[[D:.*]]: f32, %{{.*}}: f32):
// CHECK:   arith.subi
// CHECK:   arith.cmpi sge
// CHECK:   arith.cmpi slt
// CHECK:   %[[V:.*]] = tensor.extract %arg1[%{{.*}}] : tensor<3xf32>
// CHECK:   arith.select %{{.*}}, %[[V]], %[[D]] : f32
// CHECK-NOT: tensor.insert_slice
func.func @update(%x: tensor<10xf32>, %u: tensor<3xf32>, %o: index) -> tensor<10xf32> {
  %r = tensor.insert_slice %u into %x[%o] [3] [1] : tensor<3xf32> into tensor<10xf32>
  return %r : tensor<10xf32>
}
