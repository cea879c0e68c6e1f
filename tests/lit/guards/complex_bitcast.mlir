// RUN: kiln-opt %s --stage verify | FileCheck %s
// RUN: sed 's|^// SECOND ||' %s > %t.mlir && not kiln-opt %t.mlir --stage verify 2>&1 | FileCheck %s --check-prefix=ERR

// Upstream's bitcast_convert lowering crashed the process on complex elements. A bitcast
// to the same complex type is the identity and disappears; other complex bitcasts are
// rejected (by the verifier or, where it lets one through, by the guard), located.
// CHECK-LABEL: func.func @main
// CHECK-NOT: bitcast_convert
// ERR: kiln-opt: error: {{.*}}.mlir:16:8: cannot parse MLIR: {{.*}}bitcast_convert{{.*}}complex
// ERR-NOT: Traceback
func.func @main(%a: tensor<2xcomplex<f32>>) -> tensor<2xcomplex<f32>> {
  %0 = stablehlo.bitcast_convert %a : (tensor<2xcomplex<f32>>) -> tensor<2xcomplex<f32>>
  return %0 : tensor<2xcomplex<f32>>
}
// SECOND func.func @second(%a: tensor<2xcomplex<f32>>) -> tensor<2xi64> {
// SECOND   %0 = stablehlo.bitcast_convert %a : (tensor<2xcomplex<f32>>) -> tensor<2xi64>
// SECOND   return %0 : tensor<2xi64>
// SECOND }
