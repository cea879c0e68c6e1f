// RUN: not kiln-opt %s --pass kiln-lower-collectives 2>&1 | FileCheck %s

// A replica group naming a device the program does not have is a located error.
// CHECK: kiln-lower-collectives-errors.mlir:7:10: replica group [0, 5] names id 5, outside the program's 2 replica(s) x 1 partition(s)
module attributes {mhlo.num_replicas = 2 : i32} {
  func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
    %r = "stablehlo.collective_broadcast"(%x) {replica_groups = dense<[[0, 5]]> : tensor<1x2xi64>} : (tensor<4xf32>) -> tensor<4xf32>
    return %r : tensor<4xf32>
  }
}
