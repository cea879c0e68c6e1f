// RUN: kiln-opt %s --pass kiln-lower-collectives,kiln-gpu-check-supported | FileCheck %s
// RUN: kiln-opt %s --target gpu --stage legalize | FileCheck %s --check-prefix=LEGAL
// RUN: not kiln-opt %s --pass kiln-gpu-check-supported 2>&1 | FileCheck %s --check-prefix=RAW

// Host transfers, lowered by kiln-lower-collectives to the collective runtime's targets,
// become host-staged plan calls like the collectives: tokens get no buffer (a token result
// is after_all of the call's token operands), the data operands and results are buffers.
// CHECK-LABEL: func.func @main
// CHECK: %[[T:.*]] = stablehlo.create_token
// CHECK: memref.alloc() {{.*}} : memref<4xf32>
// CHECK: call @kiln_gpu_custom_call_0(%{{.*}}) {{{.*}}kiln.gpu.host_staged, kiln.gpu.opaque = "{}", kiln.gpu.results = 1 : i32, kiln.gpu.target = "kiln.collective.infeed"} : (memref<4xf32>) -> ()
// CHECK: %[[T1:.*]] = stablehlo.after_all %[[T]]
// CHECK: call @kiln_gpu_custom_call_1(%{{.*}}) {{{.*}}kiln.gpu.host_staged, kiln.gpu.opaque = "{}", kiln.gpu.results = 0 : i32, kiln.gpu.target = "kiln.collective.outfeed"} : (memref<4xf32>) -> ()
// CHECK: stablehlo.after_all %[[T1]]
// CHECK-NOT: stablehlo.custom_call
// The tokens, with no data, are gone after the stage; the calls keep their order.
// LEGAL: call @kiln_gpu_custom_call_0
// LEGAL-NOT: token
// LEGAL: call @kiln_gpu_custom_call_1

// Before kiln-lower-collectives, a host transfer is still named where it was written.
// RAW: host_transfers.mlir:25:13: 'stablehlo.infeed' (host transfer) is not supported by the GPU target yet
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %t = stablehlo.create_token : !stablehlo.token
  %d, %t2 = "stablehlo.infeed"(%t) {infeed_config = ""} : (!stablehlo.token) -> (tensor<4xf32>, !stablehlo.token)
  %y = stablehlo.add %x, %d : tensor<4xf32>
  %t3 = "stablehlo.outfeed"(%y, %t2) {outfeed_config = ""} : (tensor<4xf32>, !stablehlo.token) -> !stablehlo.token
  return %y : tensor<4xf32>
}
