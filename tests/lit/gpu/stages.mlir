// RUN: kiln-opt %s --target gpu --stage gpu-map | FileCheck %s --check-prefix=MAP
// RUN: kiln-opt %s --target gpu --stage nvvm | FileCheck %s --check-prefix=NVVM
// RUN: kiln-opt %s --target gpu --stage llvm | FileCheck %s --check-prefix=LLVM
// RUN: kiln-opt %s --target gpu --stage ptx | FileCheck %s --check-prefix=PTX
// RUN: kiln-opt %s --target gpu --gpu-arch sm_80 --stage ptx | FileCheck %s --check-prefix=PTX80
// RUN: kiln-opt %s --target gpu --stage plan | FileCheck %s --check-prefix=PLAN

// add + tanh, a row sum and a full sum: three fusions, each a kernel; the host keeps only
// launches, whose grid puts the contiguous dimension (100) on threadIdx.x.
// MAP-LABEL: func.func @main
// MAP-SAME: (%arg0: memref<64x100xf32>, %arg1: memref<100xf32>, %arg2: memref<64x100xf32>, %arg3: memref<64xf32>, %arg4: memref<f32>)
// MAP: gpu.launch_func @main_kernel::@main_kernel blocks in (%{{.*}}, %c64, %{{.*}}) threads in (%c256, %{{.*}}, %{{.*}})
// MAP-SAME: kiln.access = [{{.*}}"r", "r", "w"]
// MAP: gpu.module @main_kernel
// MAP: gpu.func @main_kernel
// MAP-SAME: kernel
// MAP: math.tanh

// NVVM: gpu.module @main_kernel [#nvvm.target<chip = "sm_90">]
// NVVM: llvm.func @__nv_tanhf(f32) -> f32
// NVVM: llvm.func @main_kernel
// NVVM-SAME: nvvm.kernel
// NVVM: nvvm.read.ptx.sreg.ctaid.x
// NVVM: nvvm.read.ptx.sreg.tid.x

// One LLVM module holding every kernel, each named after its gpu.module.
// LLVM: declare float @__nv_tanhf(float)
// LLVM: define ptx_kernel void @main_kernel(
// LLVM: define ptx_kernel void @main_kernel_0(

// PTX: .target sm_90
// PTX: .visible .entry main_kernel(
// PTX-NOT: __nv_tanhf
// PTX: .visible .entry main_kernel_0(
// PTX80: .target sm_80

// PLAN: // @main: parameters %0, %1, %2, %3, %4
// PLAN: kernel main_kernel grid=(1,64,1) block=(256,1,1) args=({{.*}}%0, %1, %2)
// PLAN: alloc
// PLAN: kernel main_kernel_{{[0-9]+}} grid=(4,1,1) block=(256,1,1)
func.func @main(%a: tensor<64x100xf32>, %b: tensor<100xf32>) -> (tensor<64x100xf32>, tensor<64xf32>, tensor<f32>) {
  %bb = stablehlo.broadcast_in_dim %b, dims = [1] : (tensor<100xf32>) -> tensor<64x100xf32>
  %s = stablehlo.add %a, %bb : tensor<64x100xf32>
  %t = stablehlo.tanh %s : tensor<64x100xf32>
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %r = stablehlo.reduce(%t init: %z) applies stablehlo.add across dimensions = [1] : (tensor<64x100xf32>, tensor<f32>) -> tensor<64xf32>
  %f = stablehlo.reduce(%t init: %z) applies stablehlo.add across dimensions = [0, 1] : (tensor<64x100xf32>, tensor<f32>) -> tensor<f32>
  return %t, %r, %f : tensor<64x100xf32>, tensor<64xf32>, tensor<f32>
}
