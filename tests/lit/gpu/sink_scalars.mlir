// RUN: kiln-opt %s --pass kiln-gpu-sink-scalars | FileCheck %s
// Scalar code a launch body reads from the host side is copied into the body, so that the
// outlined kernel takes only buffers and constants as arguments.

// CHECK-LABEL: func.func @main
// CHECK: %[[HOST:.*]] = arith.mulf
// CHECK: gpu.launch
// CHECK: %[[SUNK:.*]] = arith.mulf
// CHECK: memref.store %[[SUNK]]
// CHECK: gpu.terminator
func.func @main(%arg0: memref<64xf32>, %s: f32) {
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %two = arith.constant 2.0 : f32
  %scaled = arith.mulf %two, %two : f32
  gpu.launch blocks(%b0, %b1, %b2) in (%g0 = %c1, %g1 = %c1, %g2 = %c1) threads(%t0, %t1, %t2) in (%n0 = %c64, %n1 = %c1, %n2 = %c1) {
    memref.store %scaled, %arg0[%t0] : memref<64xf32>
    gpu.terminator
  }
  return
}
