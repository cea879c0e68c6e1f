// RUN: not kiln-opt %s --pass kiln-lower-collectives --split-input-file 2>&1 | FileCheck %s

// Each malformed collective is a located error naming what is wrong: the StableHLO verifier's
// when it knows the rule, else Kiln's (groups against the device counts, equal group sizes).

// CHECK: kiln-lower-collectives-errors.mlir:10:10: replica group [0, 5] names id 5, outside the program's 2 replica(s) x 1 partition(s)
module attributes {mhlo.num_replicas = 2 : i32} {
  func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
    // a device the program does not have
    %r = "stablehlo.collective_broadcast"(%x) {replica_groups = dense<[[0, 5]]> : tensor<1x2xi64>} : (tensor<4xf32>) -> tensor<4xf32>
    return %r : tensor<4xf32>
  }
}

// -----

// CHECK: kiln-lower-collectives-errors.mlir:20:10: cannot parse MLIR: 'stablehlo.all_gather': if `use_global_device_ids` is set, the replica groups cannot be empty
module attributes {mhlo.num_partitions = 2 : i32} {
  func.func @main(%x: tensor<2xf32>) -> tensor<4xf32> {
    %g = "stablehlo.all_gather"(%x) {all_gather_dim = 0 : i64, replica_groups = dense<> : tensor<0x0xi64>,
      channel_handle = #stablehlo.channel_handle<handle = 1, type = 0>, use_global_device_ids} : (tensor<2xf32>) -> tensor<4xf32>
    return %g : tensor<4xf32>
  }
}

// -----

// CHECK: kiln-lower-collectives-errors.mlir:31:10: cannot parse MLIR: 'stablehlo.all_to_all': group size of replica_groups must be 2
module attributes {mhlo.num_replicas = 3 : i32} {
  func.func @main(%x: tensor<6xf32>) -> tensor<6xf32> {
    %r = "stablehlo.all_to_all"(%x) {split_dimension = 0 : i64, concat_dimension = 0 : i64, split_count = 2 : i64,
      replica_groups = dense<[[0, 1, 2]]> : tensor<1x3xi64>} : (tensor<6xf32>) -> tensor<6xf32>
    return %r : tensor<6xf32>
  }
}

// -----

// CHECK: kiln-lower-collectives-errors.mlir:42:10: cannot parse MLIR: 'stablehlo.collective_permute': duplicate targets not allowed.
module attributes {mhlo.num_replicas = 2 : i32} {
  func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
    %r = "stablehlo.collective_permute"(%x) {source_target_pairs = dense<[[0, 1], [1, 1]]> : tensor<2x2xi64>} : (tensor<4xf32>) -> tensor<4xf32>
    return %r : tensor<4xf32>
  }
}

// -----

// CHECK: kiln-lower-collectives-errors.mlir:52:10: stablehlo.all_reduce: replica groups of unequal size {{\[\[}}0, 1], [2]]
module attributes {mhlo.num_replicas = 3 : i32} {
  func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
    %r = "stablehlo.all_reduce"(%x) ({
      ^bb0(%a: tensor<f32>, %b: tensor<f32>):
        %p = stablehlo.multiply %a, %b : tensor<f32>
        %s = stablehlo.subtract %p, %a : tensor<f32>
        stablehlo.return %s : tensor<f32>
    }) {replica_groups = dense<[[0, 1], [2, -1]]> : tensor<2x2xi64>} : (tensor<4xf32>) -> tensor<4xf32>
    return %r : tensor<4xf32>
  }
}
