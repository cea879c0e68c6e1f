// RUN: kiln-opt %s --target gpu --stage plan | FileCheck %s

// A while whose predicate the device computes: the condition's reduction runs as kernels,
// its result comes back to the host (memcpy-d2h) and the comparison is host arithmetic;
// the body's six launches in a row are one command buffer.
// CHECK: // @main: parameters %0, %1
// CHECK: while (%0) -> (%[[OUT:[0-9]+]])
// CHECK:   condition (%[[V:[0-9]+]]):
// CHECK:     kernel
// CHECK:     memcpy-d2h %[[SUM:[0-9]+]] <- %{{[0-9]+}}[] : f32
// CHECK:     host %[[P:[0-9]+]] = arith.cmpf %[[SUM]], %{{[0-9]+}} : i1
// CHECK:     condition %[[P]], yield
// CHECK:   body (%{{[0-9]+}}):
// CHECK:     command-buffer {{[0-9]+}} commands
// CHECK-NEXT:  kernel
// CHECK:       alloc
// CHECK:       kernel
// CHECK:     yield
// CHECK: memcpy-d2d %1+0 <- %[[OUT]]+0 32 bytes
func.func @main(%x: tensor<8xf32>) -> tensor<8xf32> {
  %r = stablehlo.while(%v = %x) : tensor<8xf32>
  cond {
    %zero = stablehlo.constant dense<0.0> : tensor<f32>
    %limit = stablehlo.constant dense<1000.0> : tensor<f32>
    %a = stablehlo.abs %v : tensor<8xf32>
    %s = stablehlo.reduce(%a init: %zero) applies stablehlo.add across dimensions = [0] : (tensor<8xf32>, tensor<f32>) -> tensor<f32>
    %p = stablehlo.compare LT, %s, %limit : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %p : tensor<i1>
  } do {
    %zero = stablehlo.constant dense<0.0> : tensor<f32>
    %two = stablehlo.constant dense<2.0> : tensor<8xf32>
    %one = stablehlo.constant dense<1.0> : tensor<8xf32>
    %m0 = stablehlo.reduce(%v init: %zero) applies stablehlo.add across dimensions = [0] : (tensor<8xf32>, tensor<f32>) -> tensor<f32>
    %b0 = stablehlo.broadcast_in_dim %m0, dims = [] : (tensor<f32>) -> tensor<8xf32>
    %y0 = stablehlo.sine %v : tensor<8xf32>
    %z0 = stablehlo.add %y0, %b0 : tensor<8xf32>
    %m1 = stablehlo.reduce(%z0 init: %zero) applies stablehlo.maximum across dimensions = [0] : (tensor<8xf32>, tensor<f32>) -> tensor<f32>
    %b1 = stablehlo.broadcast_in_dim %m1, dims = [] : (tensor<f32>) -> tensor<8xf32>
    %y1 = stablehlo.multiply %z0, %two : tensor<8xf32>
    %z1 = stablehlo.add %y1, %b1 : tensor<8xf32>
    %z2 = stablehlo.add %z1, %one : tensor<8xf32>
    stablehlo.return %z2 : tensor<8xf32>
  }
  return %r : tensor<8xf32>
}
