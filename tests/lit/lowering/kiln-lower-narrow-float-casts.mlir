// RUN: kiln-opt %s --pass kiln-lower-narrow-float-casts --split-input-file | FileCheck %s

// extf from an 8-bit float reads a table of the format's values; truncf to it rounds with
// integer code.
// CHECK-LABEL: func.func @main
// CHECK-NOT: arith.extf
// CHECK-NOT: arith.truncf
// CHECK: %[[BITS:.*]] = arith.bitcast %{{.*}} : f8E4M3FN to i8
// CHECK: %[[INDEX:.*]] = arith.index_castui %[[BITS]] : i8 to index
// CHECK: tensor.extract %{{.*}}[%[[INDEX]]] : tensor<256xf32>
// CHECK: math.roundeven
// CHECK: arith.bitcast %{{.*}} : i8 to f8E4M3FN
func.func @main(%x: f8E4M3FN, %y: f32) -> (f32, f8E4M3FN) {
  %0 = arith.extf %x : f8E4M3FN to f32
  %1 = arith.truncf %y : f32 to f8E4M3FN
  return %0, %1 : f32, f8E4M3FN
}

// -----

// Casts between LLVM's own float types are left alone.
// CHECK-LABEL: func.func @main
// CHECK-NEXT: arith.extf %{{.*}} : f16 to f32
func.func @main(%x: f16) -> f32 {
  %0 = arith.extf %x : f16 to f32
  return %0 : f32
}
