// RUN: kiln-opt %s --pass kiln-dedupe-kernels | FileCheck %s

// Two internal functions with the same code become one: the call and the function pointer
// (what kiln_parallel_for gets) both name the one kept. Different code and exported functions
// stay as they are.
// CHECK: llvm.func internal @body_a(
// CHECK-NOT: @body_b
// CHECK: llvm.func internal @body_c(
// CHECK: llvm.func @exported_copy(
// CHECK: llvm.call @body_a(
// CHECK: llvm.call @body_a(
// CHECK: llvm.call @body_c(
// CHECK: llvm.mlir.addressof @body_a
module {
  llvm.func @kiln_parallel_for(!llvm.ptr, i64)
  llvm.func internal @body_a(%p: !llvm.ptr, %n: i64) {
    %c = llvm.mlir.constant(2.0 : f32) : f32
    llvm.store %c, %p : f32, !llvm.ptr
    llvm.return
  }
  llvm.func internal @body_b(%p: !llvm.ptr, %n: i64) {
    %c = llvm.mlir.constant(2.0 : f32) : f32
    llvm.store %c, %p : f32, !llvm.ptr
    llvm.return
  }
  llvm.func internal @body_c(%p: !llvm.ptr, %n: i64) {
    %c = llvm.mlir.constant(3.0 : f32) : f32
    llvm.store %c, %p : f32, !llvm.ptr
    llvm.return
  }
  llvm.func @exported_copy(%p: !llvm.ptr, %n: i64) {
    %c = llvm.mlir.constant(2.0 : f32) : f32
    llvm.store %c, %p : f32, !llvm.ptr
    llvm.return
  }
  llvm.func @main(%p: !llvm.ptr, %n: i64) {
    llvm.call @body_a(%p, %n) : (!llvm.ptr, i64) -> ()
    llvm.call @body_b(%p, %n) : (!llvm.ptr, i64) -> ()
    llvm.call @body_c(%p, %n) : (!llvm.ptr, i64) -> ()
    %f = llvm.mlir.addressof @body_b : !llvm.ptr
    llvm.call @kiln_parallel_for(%f, %n) : (!llvm.ptr, i64) -> ()
    llvm.return
  }
}
