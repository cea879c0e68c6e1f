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

// -----

// f32 -> bf16: integer rounding to nearest even (LLVM would call __truncsfbf2 per element on
// CPUs without AVX-512 BF16); NaNs become the quiet NaN of their sign.
// CHECK-LABEL: func.func @to_bf16
// CHECK-NOT: arith.truncf
// CHECK: arith.bitcast %{{.*}} : f32 to i32
// CHECK: arith.constant 32767 : i32
// CHECK: arith.cmpf uno
// CHECK: arith.trunci %{{.*}} : i32 to i16
// CHECK: arith.bitcast %{{.*}} : i16 to bf16
func.func @to_bf16(%x: f32) -> bf16 {
  %0 = arith.truncf %x : f32 to bf16
  return %0 : bf16
}
