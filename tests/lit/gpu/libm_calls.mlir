// RUN: kiln-opt %s --pass kiln-gpu-libm-calls-as-math | FileCheck %s

// The shared legalize stage calls libm's log1pf for accuracy; a kernel cannot call the host's
// libm, so the call becomes math.log1p again (libdevice's __nv_log1pf is accurate).
// CHECK-LABEL: func.func @f
// CHECK: math.log1p %arg0 : f32
// CHECK: math.expm1 %{{.*}} : f64
// CHECK-NOT: call @
func.func private @log1pf(f32) -> f32
func.func private @expm1(f64) -> f64
func.func @f(%x: f32, %y: f64) -> (f32, f64) {
  %a = func.call @log1pf(%x) : (f32) -> f32
  %b = func.call @expm1(%y) : (f64) -> f64
  return %a, %b : f32, f64
}
