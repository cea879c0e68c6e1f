// RUN: kiln-opt %s --pass kiln-gpu-serial-kernels --split-input-file | FileCheck %s

// kiln-gpu-serial-kernels runs alone on any valid module: the serial-kernel rule is about
// buffer work, so a function still on tensors (before bufferization) is left as it is,
// including a while whose predicate the host would need once it is on buffers.
// CHECK-LABEL: func.func @stablehlo_while
// CHECK-NOT: scf.parallel
// CHECK: stablehlo.while
// CHECK-NOT: scf.parallel
// CHECK: return
func.func @stablehlo_while(%x: tensor<4xf32>) -> tensor<4xf32> {
  %i0 = stablehlo.constant dense<0> : tensor<i32>
  %w:2 = stablehlo.while(%it = %i0, %acc = %x) : tensor<i32>, tensor<4xf32>
   cond {
    %n = stablehlo.constant dense<5> : tensor<i32>
    %p = stablehlo.compare LT, %it, %n : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %p : tensor<i1>
  } do {
    %one = stablehlo.constant dense<1> : tensor<i32>
    %next = stablehlo.add %it, %one : tensor<i32>
    %m = stablehlo.multiply %acc, %acc : tensor<4xf32>
    stablehlo.return %next, %m : tensor<i32>, tensor<4xf32>
  }
  return %w#1 : tensor<4xf32>
}

// -----

// Tensors with a buffer among them (what the GPU's scatter lowering makes before
// bufferization): still not bufferized, left alone. A bufferized function in the same
// module gets its one-thread kernel.
// CHECK-LABEL: func.func @on_tensors
// CHECK-NOT: scf.parallel
// CHECK: bufferization.to_buffer
// CHECK: memref.store
// CHECK-NOT: scf.parallel
// CHECK: return
// CHECK-LABEL: func.func @on_buffers
// CHECK: scf.parallel
// CHECK:   memref.store
// CHECK:   scf.reduce
// CHECK: return
func.func @on_tensors(%x: tensor<4xf32>, %v: f32) -> tensor<4xf32> {
  %c0 = arith.constant 0 : index
  %b = bufferization.to_buffer %x : tensor<4xf32> to memref<4xf32>
  memref.store %v, %b[%c0] : memref<4xf32>
  %t = bufferization.to_tensor %b restrict writable : memref<4xf32> to tensor<4xf32>
  return %t : tensor<4xf32>
}
func.func @on_buffers(%b: memref<4xf32>, %v: f32) {
  %c0 = arith.constant 0 : index
  memref.store %v, %b[%c0] : memref<4xf32>
  return
}
