// RUN: kiln-opt %s --pass kiln-switches-as-ifs | FileCheck %s
// RUN: kiln-opt %s --pass-pipeline 'builtin.module(kiln-switches-as-ifs,one-shot-bufferize{bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map})' | FileCheck %s --check-prefix=BUF

// The miscompile this pass prevents: every value shares one tensor.empty, and the multiply
// after the switch must not write into the buffer the switch's result lives in while the
// max still reads that result. As scf.if, One-Shot Bufferize gives the multiply its own
// buffer (as scf.index_switch, it wrote in place and the max read r * 0.5).
// CHECK-LABEL: func.func @shared_empty
// CHECK-NOT: scf.index_switch
// CHECK: tensor.empty() : tensor<4xf32>
// CHECK-NEXT: %[[C0:.*]] = arith.constant 0 : index
// CHECK: %[[IS0:.*]] = arith.cmpi eq, %arg1, %[[C0]] {kiln.switch_chain = array<i64: 0>} : index
// CHECK: %[[R:.*]] = scf.if %[[IS0]] -> (tensor<4xf32>) {
// CHECK:   arith.negf
// CHECK: } else {
// CHECK:   scf.for
// CHECK: }
// CHECK: linalg.generic {{.*}} ins(%[[R]] : tensor<4xf32>)
// CHECK: arith.mulf
// BUF-LABEL: func.func @shared_empty
// Each branch writes a buffer of its own, not the one the multiply writes.
// BUF: %[[MUL_OUT:[a-z0-9_]+]] = memref.alloc() {{.*}} : memref<4xf32>
// BUF: %[[R:[0-9]+]] = scf.if
// BUF-NEXT: %[[NEG_OUT:[a-z0-9_]+]] = memref.alloc()
// BUF: outs(%[[NEG_OUT]] : memref<4xf32>)
// BUF: scf.yield %[[NEG_OUT]] :
// BUF: } else {
// BUF-NEXT: %[[COPY_OUT:[a-z0-9_]+]] = memref.alloc()
// BUF-NEXT: scf.for {{.*}} iter_args(%{{.*}} = %[[COPY_OUT]])
// BUF: linalg.generic {{.*}} ins(%[[R]] : memref<4xf32>) outs(%[[MUL_OUT]] : memref<4xf32>)
// BUF: arith.mulf
// BUF: linalg.generic {{.*}} ins(%[[R]] : memref<4xf32>)
// BUF: arith.maximumf
#id = affine_map<(d0) -> (d0)>
#red = affine_map<(d0) -> ()>
func.func @shared_empty(%x: tensor<4xf32>, %sel: index) -> (tensor<4xf32>, tensor<f32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %half = arith.constant 0.5 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %e = tensor.empty() : tensor<4xf32>
  %sw = scf.index_switch %sel -> tensor<4xf32>
  case 0 {
    %n = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]} ins(%x : tensor<4xf32>) outs(%e : tensor<4xf32>) {
    ^bb0(%in: f32, %out: f32):
      %v = arith.negf %in : f32
      linalg.yield %v : f32
    } -> tensor<4xf32>
    scf.yield %n : tensor<4xf32>
  }
  default {
    %r = scf.for %i = %c0 to %c4 step %c1 iter_args(%acc = %e) -> (tensor<4xf32>) {
      %v = tensor.extract %x[%i] : tensor<4xf32>
      %ins = tensor.insert %v into %acc[%i] : tensor<4xf32>
      scf.yield %ins : tensor<4xf32>
    }
    scf.yield %r : tensor<4xf32>
  }
  %scaled = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]} ins(%sw : tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %v = arith.mulf %in, %half : f32
    linalg.yield %v : f32
  } -> tensor<4xf32>
  %init = tensor.empty() : tensor<f32>
  %fill = linalg.fill ins(%ninf : f32) outs(%init : tensor<f32>) -> tensor<f32>
  %max = linalg.generic {indexing_maps = [#id, #red], iterator_types = ["reduction"]} ins(%sw : tensor<4xf32>) outs(%fill : tensor<f32>) {
  ^bb0(%in: f32, %out: f32):
    %v = arith.maximumf %out, %in : f32
    linalg.yield %v : f32
  } -> tensor<f32>
  return %scaled, %max : tensor<4xf32>, tensor<f32>
}

