// RUN: kiln-opt %s --pass kiln-copies-as-loops --split-input-file | FileCheck %s

// A copy between strided views (which would call memrefCopy, absent from the JIT) becomes
// a linalg.copy, lowered to plain loops later.
// CHECK-LABEL: func.func @main
// CHECK-NOT: memref.copy
// CHECK: linalg.copy {{.*}}ins(%{{.*}} : memref<4x4xf32, strided<[8, 1]>>) outs(%{{.*}} : memref<4x4xf32, strided<[8, 1], offset: 2>>)
func.func @main(%a: memref<4x4xf32, strided<[8, 1]>>, %b: memref<4x4xf32, strided<[8, 1], offset: 2>>) {
  memref.copy %a, %b : memref<4x4xf32, strided<[8, 1]>> to memref<4x4xf32, strided<[8, 1], offset: 2>>
  return
}

// -----

// A contiguous copy stays a memcpy.
// CHECK-LABEL: func.func @main
// CHECK: memref.copy
func.func @main(%a: memref<4x4xf32>, %b: memref<4x4xf32>) {
  memref.copy %a, %b : memref<4x4xf32> to memref<4x4xf32>
  return
}
