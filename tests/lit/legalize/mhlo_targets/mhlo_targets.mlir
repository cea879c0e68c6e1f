// RUN: kiln-opt %s --pass kiln-lower-jax-custom-calls | FileCheck %s
// RUN: kiln-opt %s --stage legalize | FileCheck %s --check-prefix=LEGAL

// MHLO ops StableHLO lacks, as torch_xla writes them: mhlo.erf becomes a linalg.generic of
// math.erf (bf16 computed in f32), mhlo.tan stablehlo.tan, mhlo.topk a stable sort of
// (values, iota) by the values in total order, sliced to k.
// CHECK-LABEL: func.func @main
// CHECK: %[[W:.*]] = stablehlo.convert %arg0 : (tensor<2x8xbf16>) -> tensor<2x8xf32>
// CHECK: linalg.generic {{.*}} ins(%[[W]] : tensor<2x8xf32>)
// CHECK: math.erf %{{.*}} : f32
// CHECK: stablehlo.convert %{{.*}} : (tensor<2x8xf32>) -> tensor<2x8xbf16>
// CHECK: stablehlo.tan %arg1 : tensor<2x8xf32>
// CHECK: %[[I:.*]] = stablehlo.iota dim = 1 : tensor<2x8xi32>
// CHECK: "stablehlo.sort"(%arg1, %[[I]]) <{dimension = 1 : i64, is_stable = true}>
// CHECK: stablehlo.compare GT, %{{.*}}, %{{.*}}, TOTALORDER
// CHECK: stablehlo.slice %{{.*}} [0:2, 0:3]
// CHECK: stablehlo.slice %{{.*}} [0:2, 0:3]
// CHECK-NOT: custom_call
// After legalization nothing is left to call: erf is the C library's erff.
// LEGAL-LABEL: func.func @main
// LEGAL: math.erf
// LEGAL-NOT: custom_call
func.func @main(%x: tensor<2x8xbf16>, %y: tensor<2x8xf32>) -> (tensor<2x8xbf16>, tensor<2x8xf32>, tensor<2x3xf32>, tensor<2x3xi32>) {
  %0 = stablehlo.custom_call @mhlo.erf(%x) {mhlo.attributes = {}, mhlo.version = 1 : i64} : (tensor<2x8xbf16>) -> tensor<2x8xbf16>
  %1 = stablehlo.custom_call @mhlo.tan(%y) {mhlo.attributes = {}, mhlo.version = 1 : i64} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %2:2 = stablehlo.custom_call @mhlo.topk(%y) {mhlo.attributes = {k = 3 : i64, largest = true}, mhlo.version = 1 : i64} : (tensor<2x8xf32>) -> (tensor<2x3xf32>, tensor<2x3xi32>)
  return %0, %1, %2#0, %2#1 : tensor<2x8xbf16>, tensor<2x8xf32>, tensor<2x3xf32>, tensor<2x3xi32>
}
