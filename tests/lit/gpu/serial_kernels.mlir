// RUN: kiln-opt %s --pass kiln-gpu-serial-kernels | FileCheck %s

// Work outside a parallel loop (a reduction to a scalar, a 0-d store) would run on the host,
// where device buffers cannot be touched: each run of it becomes a one-iteration
// scf.parallel, later a one-thread kernel. Parallel loops and allocations stay as they are.
// CHECK-LABEL: func.func @full
// CHECK: memref.alloc
// CHECK: scf.parallel (%{{.*}}) = (%{{.*}}) to (%{{.*}}) step
// CHECK:   memref.store %{{.*}}, %arg1[]
// CHECK:   scf.for
// CHECK:     memref.load %arg0
// CHECK:   scf.reduce
// CHECK-NOT: scf.parallel
// CHECK: return
func.func @full(%x: memref<64xf32>, %o: memref<f32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %zero = arith.constant 0.0 : f32
  %tmp = memref.alloc() : memref<4xf32>
  memref.store %zero, %o[] : memref<f32>
  scf.for %i = %c0 to %c64 step %c1 {
    %v = memref.load %x[%i] : memref<64xf32>
    %acc = memref.load %o[] : memref<f32>
    %s = arith.addf %acc, %v : f32
    memref.store %s, %o[] : memref<f32>
  }
  return
}
