// RUN: kiln-opt %s --pass kiln-gpu-check-kernels --split-input-file | FileCheck %s
// RUN: kiln-opt %s --pass kiln-gpu-check-host --split-input-file | FileCheck %s
// RUN: not kiln-opt %S/inputs/foreign_kernel_op.mlir --pass kiln-gpu-check-kernels 2>&1 | FileCheck %s --check-prefix=FOREIGN
// After the nvvm stage both checks let a lowered program through unchanged; an op left
// unlowered in a kernel is named, with its location, instead of failing in translation.

// CHECK: gpu.launch_func @main_kernel::@main_kernel
// CHECK: gpu.module @main_kernel
// CHECK: llvm.func @main_kernel
// FOREIGN: kiln-opt: error: {{.*}}foreign_kernel_op.mlir:4:12: 'math.erf' has no lowering in GPU kernels yet
module attributes {gpu.container_module} {
  func.func @main(%arg0: memref<64x32xf32>, %arg1: memref<64xf32>) attributes {kiln.gpu.inputs = 1 : i64} {
    %true = arith.constant true
    %c256 = arith.constant 256 : index
    %c1 = arith.constant 1 : index
    %c64 = arith.constant 64 : index
    %c0 = arith.constant 0 : index
    %cst = arith.constant 0.000000e+00 : f32
    %c32 = arith.constant 32 : index
    gpu.launch_func  @main_kernel::@main_kernel blocks in (%c1, %c1, %c1) threads in (%c256, %c1, %c1)  args(%c256 : index, %c0 : index, %c1 : index, %c64 : index, %true : i1, %cst : f32, %arg1 : memref<64xf32>) {kiln.access = ["", "", "", "", "", "", "w"]}
    gpu.launch_func  @main_kernel_0::@main_kernel blocks in (%c1, %c1, %c1) threads in (%c256, %c1, %c1)  args(%c256 : index, %c0 : index, %c1 : index, %c64 : index, %true : i1, %arg0 : memref<64x32xf32>, %arg1 : memref<64xf32>, %c32 : index) {kiln.access = ["", "", "", "", "", "r", "rw", ""]}
    return
  }
  gpu.module @main_kernel [#nvvm.target<chip = "sm_90">] {
    llvm.func @main_kernel(%arg0: i64, %arg1: i64, %arg2: i64, %arg3: i64, %arg4: i1, %arg5: f32, %arg6: !llvm.ptr, %arg7: !llvm.ptr, %arg8: i64, %arg9: i64, %arg10: i64) attributes {gpu.kernel, nvvm.kernel} {
      %0 = llvm.mlir.poison : !llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)>
      %1 = llvm.insertvalue %arg6, %0[0] : !llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)> 
      %2 = llvm.insertvalue %arg7, %1[1] : !llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)> 
      %3 = llvm.insertvalue %arg8, %2[2] : !llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)> 
      %4 = llvm.insertvalue %arg9, %3[3, 0] : !llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)> 
      %5 = llvm.insertvalue %arg10, %4[4, 0] : !llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)> 
      %6 = nvvm.read.ptx.sreg.ctaid.x : i32
      %7 = llvm.sext %6 : i32 to i64
      %8 = nvvm.read.ptx.sreg.tid.x : i32
      %9 = llvm.sext %8 : i32 to i64
      %10 = llvm.mul %7, %arg0 overflow<nsw> : i64
      %11 = llvm.add %10, %arg1 : i64
      %12 = llvm.mul %9, %arg2 overflow<nsw> : i64
      %13 = llvm.add %12, %arg1 : i64
      %14 = llvm.add %13, %11 : i64
      %15 = llvm.mul %13, %arg2 : i64
      %16 = llvm.add %15, %11 : i64
      %17 = llvm.icmp "ult" %16, %arg3 : i64
      %18 = llvm.and %arg4, %17 : i1
      llvm.cond_br %18, ^bb1, ^bb2
    ^bb1:  // pred: ^bb0
      %19 = llvm.extractvalue %5[1] : !llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)> 
      %20 = llvm.getelementptr inbounds|nuw %19[%14] : (!llvm.ptr, i64) -> !llvm.ptr, f32
      llvm.store %arg5, %20 : f32, !llvm.ptr
      llvm.br ^bb2
    ^bb2:  // 2 preds: ^bb0, ^bb1
      llvm.return
    }
  }
  gpu.module @main_kernel_0 [#nvvm.target<chip = "sm_90">] {
    llvm.func @__nv_tanhf(f32) -> f32
    llvm.func @main_kernel(%arg0: i64, %arg1: i64, %arg2: i64, %arg3: i64, %arg4: i1, %arg5: !llvm.ptr, %arg6: !llvm.ptr, %arg7: i64, %arg8: i64, %arg9: i64, %arg10: i64, %arg11: i64, %arg12: !llvm.ptr, %arg13: !llvm.ptr, %arg14: i64, %arg15: i64, %arg16: i64, %arg17: i64) attributes {gpu.kernel, nvvm.kernel} {
      %0 = llvm.mlir.poison : !llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)>
      %1 = llvm.insertvalue %arg12, %0[0] : !llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)> 
      %2 = llvm.insertvalue %arg13, %1[1] : !llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)> 
      %3 = llvm.insertvalue %arg14, %2[2] : !llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)> 
      %4 = llvm.insertvalue %arg15, %3[3, 0] : !llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)> 
      %5 = llvm.insertvalue %arg16, %4[4, 0] : !llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)> 
      %6 = llvm.mlir.poison : !llvm.struct<(ptr, ptr, i64, array<2 x i64>, array<2 x i64>)>
      %7 = llvm.insertvalue %arg5, %6[0] : !llvm.struct<(ptr, ptr, i64, array<2 x i64>, array<2 x i64>)> 
      %8 = llvm.insertvalue %arg6, %7[1] : !llvm.struct<(ptr, ptr, i64, array<2 x i64>, array<2 x i64>)> 
      %9 = llvm.insertvalue %arg7, %8[2] : !llvm.struct<(ptr, ptr, i64, array<2 x i64>, array<2 x i64>)> 
      %10 = llvm.insertvalue %arg8, %9[3, 0] : !llvm.struct<(ptr, ptr, i64, array<2 x i64>, array<2 x i64>)> 
      %11 = llvm.insertvalue %arg10, %10[4, 0] : !llvm.struct<(ptr, ptr, i64, array<2 x i64>, array<2 x i64>)> 
      %12 = llvm.insertvalue %arg9, %11[3, 1] : !llvm.struct<(ptr, ptr, i64, array<2 x i64>, array<2 x i64>)> 
      %13 = llvm.insertvalue %arg11, %12[4, 1] : !llvm.struct<(ptr, ptr, i64, array<2 x i64>, array<2 x i64>)> 
      %14 = nvvm.read.ptx.sreg.ctaid.x : i32
      %15 = llvm.sext %14 : i32 to i64
      %16 = nvvm.read.ptx.sreg.tid.x : i32
      %17 = llvm.sext %16 : i32 to i64
      %18 = llvm.mul %15, %arg0 overflow<nsw> : i64
      %19 = llvm.add %18, %arg1 : i64
      %20 = llvm.mul %17, %arg2 overflow<nsw> : i64
      %21 = llvm.add %20, %arg1 : i64
      %22 = llvm.add %21, %19 : i64
      %23 = llvm.mul %21, %arg2 : i64
      %24 = llvm.add %23, %19 : i64
      %25 = llvm.icmp "ult" %24, %arg3 : i64
      %26 = llvm.and %arg4, %25 : i1
      llvm.cond_br %26, ^bb1, ^bb5
    ^bb1:  // pred: ^bb0
      llvm.br ^bb2(%arg1 : i64)
    ^bb2(%27: i64):  // 2 preds: ^bb1, ^bb3
      %28 = llvm.icmp "slt" %27, %arg17 : i64
      llvm.cond_br %28, ^bb3, ^bb4
    ^bb3:  // pred: ^bb2
      %29 = llvm.extractvalue %13[1] : !llvm.struct<(ptr, ptr, i64, array<2 x i64>, array<2 x i64>)> 
      %30 = llvm.mlir.constant(32 : index) : i64
      %31 = llvm.mul %22, %30 overflow<nsw, nuw> : i64
      %32 = llvm.add %31, %27 overflow<nsw, nuw> : i64
      %33 = llvm.getelementptr inbounds|nuw %29[%32] : (!llvm.ptr, i64) -> !llvm.ptr, f32
      %34 = llvm.load %33 : !llvm.ptr -> f32
      %35 = llvm.extractvalue %5[1] : !llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)> 
      %36 = llvm.getelementptr inbounds|nuw %35[%22] : (!llvm.ptr, i64) -> !llvm.ptr, f32
      %37 = llvm.load %36 : !llvm.ptr -> f32
      %38 = llvm.call @__nv_tanhf(%34) : (f32) -> f32
      %39 = llvm.fadd %37, %38 : f32
      %40 = llvm.extractvalue %5[1] : !llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)> 
      %41 = llvm.getelementptr inbounds|nuw %40[%22] : (!llvm.ptr, i64) -> !llvm.ptr, f32
      llvm.store %39, %41 : f32, !llvm.ptr
      %42 = llvm.add %27, %arg2 : i64
      llvm.br ^bb2(%42 : i64)
    ^bb4:  // pred: ^bb2
      llvm.br ^bb5
    ^bb5:  // 2 preds: ^bb0, ^bb4
      llvm.return
    }
  }
}
