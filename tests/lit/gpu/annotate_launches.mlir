// RUN: kiln-opt %s --pass kiln-gpu-annotate-launches | FileCheck %s
// Each launch records, per argument, whether its kernel reads and/or writes that buffer
// (scalars: ""), for the plan's thunks. The first kernel only writes the result (a fill);
// the second reads the input and reads and writes the result (an accumulation).

// CHECK: gpu.launch_func @main_kernel::@main_kernel
// CHECK-SAME: {kiln.access = ["", "", "", "", "", "", "w"]}
// CHECK: gpu.launch_func @main_kernel_0::@main_kernel
// CHECK-SAME: {kiln.access = ["", "", "", "", "", "r", "rw", ""]}
#map = affine_map<(d0)[s0, s1] -> ((d0 - s0) ceildiv s1)>
#map1 = affine_map<(d0)[s0, s1] -> (d0 * s0 + s1)>
module attributes {gpu.container_module} {
  func.func @main(%arg0: memref<64x32xf32>, %arg1: memref<64xf32>) attributes {kiln.gpu.inputs = 1 : i64} {
    %true = arith.constant true
    %c256 = arith.constant 256 : index
    %c1 = arith.constant 1 : index
    %c64 = arith.constant 64 : index
    %c0 = arith.constant 0 : index
    %cst = arith.constant 0.000000e+00 : f32
    %c32 = arith.constant 32 : index
    %c1_0 = arith.constant 1 : index
    %0 = affine.apply #map(%c64)[%c0, %c256]
    %1 = affine.apply #map(%c256)[%c0, %c1]
    gpu.launch_func  @main_kernel::@main_kernel blocks in (%0, %c1_0, %c1_0) threads in (%1, %c1_0, %c1_0)  args(%c256 : index, %c0 : index, %c1 : index, %c64 : index, %true : i1, %cst : f32, %arg1 : memref<64xf32>)
    %c1_1 = arith.constant 1 : index
    %2 = affine.apply #map(%c64)[%c0, %c256]
    %3 = affine.apply #map(%c256)[%c0, %c1]
    gpu.launch_func  @main_kernel_0::@main_kernel blocks in (%2, %c1_1, %c1_1) threads in (%3, %c1_1, %c1_1)  args(%c256 : index, %c0 : index, %c1 : index, %c64 : index, %true : i1, %arg0 : memref<64x32xf32>, %arg1 : memref<64xf32>, %c32 : index)
    return
  }
  gpu.module @main_kernel {
    gpu.func @main_kernel(%arg0: index, %arg1: index, %arg2: index, %arg3: index, %arg4: i1, %arg5: f32, %arg6: memref<64xf32>) kernel {
      %block_id_x = gpu.block_id x
      %block_id_y = gpu.block_id y
      %block_id_z = gpu.block_id z
      %thread_id_x = gpu.thread_id x
      %thread_id_y = gpu.thread_id y
      %thread_id_z = gpu.thread_id z
      %grid_dim_x = gpu.grid_dim x
      %grid_dim_y = gpu.grid_dim y
      %grid_dim_z = gpu.grid_dim z
      %block_dim_x = gpu.block_dim x
      %block_dim_y = gpu.block_dim y
      %block_dim_z = gpu.block_dim z
      %0 = affine.apply #map1(%block_id_x)[%arg0, %arg1]
      %1 = affine.apply #map1(%thread_id_x)[%arg2, %arg1]
      %2 = arith.addi %1, %0 : index
      %3 = arith.muli %1, %arg2 : index
      %4 = arith.addi %3, %0 : index
      %5 = arith.cmpi ult, %4, %arg3 : index
      %6 = arith.andi %arg4, %5 : i1
      scf.if %6 {
        memref.store %arg5, %arg6[%2] : memref<64xf32>
      }
      gpu.return
    }
  }
  gpu.module @main_kernel_0 {
    gpu.func @main_kernel(%arg0: index, %arg1: index, %arg2: index, %arg3: index, %arg4: i1, %arg5: memref<64x32xf32>, %arg6: memref<64xf32>, %arg7: index) kernel {
      %block_id_x = gpu.block_id x
      %block_id_y = gpu.block_id y
      %block_id_z = gpu.block_id z
      %thread_id_x = gpu.thread_id x
      %thread_id_y = gpu.thread_id y
      %thread_id_z = gpu.thread_id z
      %grid_dim_x = gpu.grid_dim x
      %grid_dim_y = gpu.grid_dim y
      %grid_dim_z = gpu.grid_dim z
      %block_dim_x = gpu.block_dim x
      %block_dim_y = gpu.block_dim y
      %block_dim_z = gpu.block_dim z
      %0 = affine.apply #map1(%block_id_x)[%arg0, %arg1]
      %1 = affine.apply #map1(%thread_id_x)[%arg2, %arg1]
      %2 = arith.addi %1, %0 : index
      %3 = arith.muli %1, %arg2 : index
      %4 = arith.addi %3, %0 : index
      %5 = arith.cmpi ult, %4, %arg3 : index
      %6 = arith.andi %arg4, %5 : i1
      scf.if %6 {
        scf.for %arg8 = %arg1 to %arg7 step %arg2 {
          %7 = memref.load %arg5[%2, %arg8] : memref<64x32xf32>
          %8 = memref.load %arg6[%2] : memref<64xf32>
          %9 = math.tanh %7 : f32
          %10 = arith.addf %8, %9 : f32
          memref.store %10, %arg6[%2] : memref<64xf32>
        }
      }
      gpu.return
    }
  }
}
