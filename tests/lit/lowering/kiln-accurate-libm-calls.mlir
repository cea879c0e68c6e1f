// RUN: kiln-opt %s --pass kiln-accurate-libm-calls --split-input-file | FileCheck %s

// math.log1p and math.expm1 call libm (LLVM's own expansion, log(1 + x), loses every digit
// for small x); f16 goes through f32.
// CHECK-LABEL: func.func @main
// CHECK-NOT: math.
// CHECK: call @log1pf(%{{.*}}) : (f32) -> f32
// CHECK: arith.extf %{{.*}} : f16 to f32
// CHECK: call @expm1f
// CHECK: arith.truncf %{{.*}} : f32 to f16
// CHECK: func.func private @log1pf(f32) -> f32
// CHECK: func.func private @expm1f(f32) -> f32
func.func @main(%x: f32, %h: f16) -> (f32, f16) {
  %0 = math.log1p %x : f32
  %1 = math.expm1 %h : f16
  return %0, %1 : f32, f16
}

// -----

// Other math stays for the usual lowering.
// CHECK-LABEL: func.func @main
// CHECK-NEXT: math.exp
func.func @main(%x: f32) -> f32 {
  %0 = math.exp %x : f32
  return %0 : f32
}
