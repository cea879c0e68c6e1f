// RUN: kiln-opt %s --pass kiln-gpu-serial-kernels --split-input-file | FileCheck %s

// A while whose regions hold device work stays on the host: its condition's reduction
// becomes a one-thread kernel, the predicate's load a download the plan reads back, and
// the comparison stays host arithmetic. The body's parallel loop is left for mapping.
// CHECK-LABEL: func.func @while_on_device_sum
// CHECK: scf.while
// CHECK:   memref.alloc() {{.*}}: memref<f32>
// CHECK:   scf.parallel (%{{.*}}) = (%{{.*}}) to (%{{.*}}) step
// CHECK:     memref.store
// CHECK:     scf.for
// CHECK:     scf.reduce
// CHECK:   %[[SUM:.*]] = memref.load %{{.*}}[] {kiln.gpu.download} : memref<f32>
// CHECK:   %[[P:.*]] = arith.cmpf olt, %[[SUM]]
// CHECK:   scf.condition(%[[P]])
// CHECK: } do {
// CHECK:   scf.parallel
// CHECK:   scf.yield
func.func @while_on_device_sum(%x: memref<8xf32>, %out: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %zero = arith.constant 0.0 : f32
  %limit = arith.constant 100.0 : f32
  %two = arith.constant 2.0 : f32
  %r = scf.while (%v = %x) : (memref<8xf32>) -> memref<8xf32> {
    %acc = memref.alloc() : memref<f32>
    memref.store %zero, %acc[] : memref<f32>
    scf.for %i = %c0 to %c8 step %c1 {
      %e = memref.load %v[%i] : memref<8xf32>
      %a = memref.load %acc[] : memref<f32>
      %s = arith.addf %a, %e : f32
      memref.store %s, %acc[] : memref<f32>
    }
    %sum = memref.load %acc[] : memref<f32>
    %p = arith.cmpf olt, %sum, %limit : f32
    scf.condition(%p) %v : memref<8xf32>
  } do {
  ^bb0(%v: memref<8xf32>):
    %next = memref.alloc() : memref<8xf32>
    scf.parallel (%i) = (%c0) to (%c8) step (%c1) {
      %e = memref.load %v[%i] : memref<8xf32>
      %d = arith.mulf %e, %two : f32
      memref.store %d, %next[%i] : memref<8xf32>
      scf.reduce
    }
    scf.yield %next : memref<8xf32>
  }
  memref.copy %r, %out : memref<8xf32> to memref<8xf32>
  return
}

// -----

// A serial loop of loads and stores carries no buffer and holds no device work: it is
// kernel work itself (one thread).
// CHECK-LABEL: func.func @serial_loop
// CHECK: scf.parallel
// CHECK:   scf.for
// CHECK:   scf.reduce
// CHECK-NOT: kiln.gpu.download
func.func @serial_loop(%x: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  scf.for %i = %c1 to %c8 step %c1 {
    %j = arith.subi %i, %c1 : index
    %a = memref.load %x[%j] : memref<8xf32>
    %b = memref.load %x[%i] : memref<8xf32>
    %s = arith.addf %a, %b : f32
    memref.store %s, %x[%i] : memref<8xf32>
  }
  return
}

// -----

// A scalar one kernel computes and a later one reads crosses them through a 0-d buffer:
// stored at the end of the first one-thread kernel, loaded in the second.
// CHECK-LABEL: func.func @scalar_between_kernels
// CHECK: %[[SPILL:.*]] = memref.alloc() : memref<f32>
// CHECK: scf.parallel
// CHECK:   %[[V:.*]] = memref.load %arg0[%{{.*}}]
// CHECK:   %[[W:.*]] = arith.mulf %[[V]]
// CHECK:   memref.store %[[W]], %[[SPILL]][]
// CHECK: scf.parallel
// CHECK: scf.parallel
// CHECK:   %[[R:.*]] = memref.load %[[SPILL]][]
// CHECK:   memref.store %[[R]], %arg1[%{{.*}}]
func.func @scalar_between_kernels(%x: memref<8xf32>, %y: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %c8 = arith.constant 8 : index
  %ten = arith.constant 10.0 : f32
  %v = memref.load %x[%c3] : memref<8xf32>
  %w = arith.mulf %v, %ten : f32
  scf.parallel (%i) = (%c0) to (%c8) step (%c1) {
    memref.store %ten, %y[%i] : memref<8xf32>
    scf.reduce
  }
  memref.store %w, %y[%c3] : memref<8xf32>
  return
}
