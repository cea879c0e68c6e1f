// RUN: kiln-opt %s --stage codegen | FileCheck %s

// f32 sin/cos/tan and log1p are evaluated in f64 as plain arithmetic LLVM can vectorize: the
// reduction by pi/2 reads the per-exponent residues of 2/pi from one constant table (declared
// once), rounds with roundeven and picks the quadrant with integer ops; log1p (the libm call
// kiln-accurate-libm-calls made) becomes f64 arithmetic too. f64 sin keeps the libm-backed op.
// CHECK: memref.global "private" constant @__kiln_trig_reduction : memref<512xf64>
// CHECK-NOT: memref.global
// CHECK-LABEL: func.func @main
// CHECK-NOT: math.sin {{.*}} : f32
// CHECK: memref.get_global @__kiln_trig_reduction
// CHECK: memref.load
// CHECK: math.roundeven {{.*}} : f64
// CHECK: arith.truncf {{.*}} : f64 to f32
// CHECK-NOT: math.cos {{.*}} : f32
// CHECK-NOT: call @log1pf
// CHECK: math.sin {{.*}} : f64
// CHECK-NOT: call @log1pf
func.func @main(%x: tensor<64xf32>, %y: tensor<8xf64>) -> (tensor<64xf32>, tensor<64xf32>, tensor<64xf32>, tensor<8xf64>) {
  %0 = stablehlo.sine %x : tensor<64xf32>
  %1 = stablehlo.cosine %x : tensor<64xf32>
  %2 = stablehlo.log_plus_one %x : tensor<64xf32>
  %3 = stablehlo.sine %y : tensor<8xf64>
  return %0, %1, %2, %3 : tensor<64xf32>, tensor<64xf32>, tensor<64xf32>, tensor<8xf64>
}
