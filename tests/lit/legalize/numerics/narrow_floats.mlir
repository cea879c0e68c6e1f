// RUN: kiln-opt %s --stage legalize | FileCheck %s

// Arithmetic on f8 runs in f32: widening reads a 256-entry table of the format's values, and
// narrowing rounds to nearest even with integer code (roundeven of |x| / 2^(e - 3)), leaving no
// arith.extf/truncf on f8E4M3FN for LLVM to choke on.
// CHECK-LABEL: func.func @main
// CHECK: arith.constant dense<{{.*}}> : tensor<256xf32>
// CHECK: arith.bitcast %{{.*}} : f8E4M3FN to i8
// CHECK: tensor.extract
// CHECK: arith.addf %{{.*}}, %{{.*}} : f32
// CHECK: math.roundeven
// CHECK: arith.bitcast %{{.*}} : i8 to f8E4M3FN
// CHECK-NOT: arith.extf %{{.*}} : f8E4M3FN
// CHECK-NOT: arith.truncf %{{.*}} to f8E4M3FN
func.func @main(%a: tensor<4xf8E4M3FN>, %b: tensor<4xf8E4M3FN>) -> tensor<4xf8E4M3FN> {
  %0 = stablehlo.add %a, %b : tensor<4xf8E4M3FN>
  return %0 : tensor<4xf8E4M3FN>
}
