// RUN: kiln-opt %s --pass kiln-lower-collectives --split-input-file | FileCheck %s

// An all_reduce whose combiner is one add becomes one runtime call, its groups resolved to
// device ids (cross-replica: replica groups within each partition).
// CHECK-LABEL: func.func @main
// CHECK: stablehlo.custom_call @kiln.collective.all_reduce(%arg0)
// CHECK-SAME: \22groups\22: [[0, 2], [1, 3]]
// CHECK-SAME: \22reduction\22: \22add\22
// CHECK-SAME: has_side_effect = true
// CHECK-NOT: stablehlo.all_reduce
module attributes {mhlo.num_replicas = 4 : i32} {
  func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
    %r = "stablehlo.all_reduce"(%x) ({
      ^bb0(%a: tensor<f32>, %b: tensor<f32>):
        %s = stablehlo.add %a, %b : tensor<f32>
        stablehlo.return %s : tensor<f32>
    }) {replica_groups = dense<[[0, 2], [1, 3]]> : tensor<2x2xi64>} : (tensor<4xf32>) -> tensor<4xf32>
    return %r : tensor<4xf32>
  }
}

// -----

// Any other combiner stays code: the members' operands are gathered, stacked, and folded
// left to right with the region (stablehlo.map), the same way on every member.
// CHECK-LABEL: func.func @main
// CHECK: %[[S:.*]] = stablehlo.custom_call @kiln.collective.all_gather_stacked(%arg0)
// CHECK-SAME: -> tensor<2x4xf32>
// CHECK: stablehlo.slice %[[S]] [0:1, 0:4]
// CHECK: stablehlo.slice %[[S]] [1:2, 0:4]
// CHECK: stablehlo.map
// CHECK: stablehlo.multiply
// CHECK: stablehlo.subtract
module attributes {mhlo.num_replicas = 2 : i32} {
  func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
    %r = "stablehlo.all_reduce"(%x) ({
      ^bb0(%a: tensor<f32>, %b: tensor<f32>):
        %p = stablehlo.multiply %a, %b : tensor<f32>
        %s = stablehlo.subtract %p, %a : tensor<f32>
        stablehlo.return %s : tensor<f32>
    }) {replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<4xf32>) -> tensor<4xf32>
    return %r : tensor<4xf32>
  }
}

// -----

// With a channel and global ids, the groups are device ids as written; a channel without
// global ids takes in every partition of the listed replicas.
// CHECK-LABEL: func.func @main
// CHECK: @kiln.collective.all_gather(%arg0) {backend_config = "{\22groups\22: [[1, 0]], \22dim\22: 0}"
// CHECK: @kiln.collective.all_gather(%arg0) {backend_config = "{\22groups\22: [[0, 1]], \22dim\22: 0}"
module attributes {mhlo.num_partitions = 2 : i32} {
  func.func @main(%x: tensor<2xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
    %g = "stablehlo.all_gather"(%x) {all_gather_dim = 0 : i64, replica_groups = dense<[[1, 0]]> : tensor<1x2xi64>,
      channel_handle = #stablehlo.channel_handle<handle = 1, type = 0>, use_global_device_ids} : (tensor<2xf32>) -> tensor<4xf32>
    %h = "stablehlo.all_gather"(%x) {all_gather_dim = 0 : i64, replica_groups = dense<[[0]]> : tensor<1x1xi64>,
      channel_handle = #stablehlo.channel_handle<handle = 2, type = 0>} : (tensor<2xf32>) -> tensor<4xf32>
    return %g, %h : tensor<4xf32>, tensor<4xf32>
  }
}

// -----

// On one device, replica_id is left for kiln-fix-semantics (it folds to 0); on several it
// asks the runtime.
// CHECK-LABEL: func.func @main
// CHECK: stablehlo.replica_id
func.func @main() -> tensor<ui32> {
  %r = stablehlo.replica_id : tensor<ui32>
  return %r : tensor<ui32>
}

// -----

// CHECK-LABEL: func.func @main
// CHECK: stablehlo.custom_call @kiln.collective.device_id() {backend_config = "{\22which\22: \22partition\22}"
module attributes {mhlo.num_partitions = 2 : i32} {
  func.func @main() -> tensor<ui32> {
    %r = stablehlo.partition_id : tensor<ui32>
    return %r : tensor<ui32>
  }
}

