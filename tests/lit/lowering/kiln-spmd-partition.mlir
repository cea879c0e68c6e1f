// RUN: kiln-opt %s --pass kiln-spmd-partition --split-input-file | FileCheck %s

// A shard_map body between markers with the argument's and result's own shardings reads and
// writes the shards as they are: the device program takes and returns its shard, and moves
// no data but its collective's.
// CHECK-LABEL: func.func @main
// CHECK-SAME: (%arg0: tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NOT: kiln.spmd
// CHECK-NOT: all_gather
// CHECK: stablehlo.multiply %arg0
// CHECK-NEXT: return
module attributes {mhlo.num_partitions = 2 : i32} {
  func.func @main(%x: tensor<4x3xf32> {kiln.sharding = "{\22tiles\22: [2, 1], \22devices\22: [0, 1]}"}) -> (tensor<4x3xf32> {kiln.sharding = "{\22tiles\22: [2, 1], \22devices\22: [0, 1]}"}) {
    %l = stablehlo.custom_call @kiln.spmd.to_local(%x) {kiln.sharding = "{\22tiles\22: [2, 1], \22devices\22: [0, 1]}"} : (tensor<4x3xf32>) -> tensor<2x3xf32>
    %m = stablehlo.multiply %l, %l : tensor<2x3xf32>
    %g = stablehlo.custom_call @kiln.spmd.to_global(%m) {kiln.sharding = "{\22tiles\22: [2, 1], \22devices\22: [0, 1]}"} : (tensor<2x3xf32>) -> tensor<4x3xf32>
    return %g : tensor<4x3xf32>
  }
}

// -----

// Outside shard_map bodies values are whole: a sharded argument is gathered (one all_gather
// per split dimension, over the devices holding the rest of that dimension), and a sharded
// result is cut out at this device's offsets (a table indexed by partition_id).
// CHECK-LABEL: func.func @main
// CHECK-SAME: (%arg0: tensor<2x2xf32>) -> tensor<4x2xf32>
// CHECK: %[[A:.*]] = "stablehlo.all_gather"(%arg0) <{all_gather_dim = 0 : i64, {{.*}}replica_groups = dense<{{\[\[}}0, 2], [1, 3]]> : tensor<2x2xi64>, use_global_device_ids}>
// CHECK-SAME: -> tensor<4x2xf32>
// CHECK: %[[B:.*]] = "stablehlo.all_gather"(%[[A]]) <{all_gather_dim = 1 : i64, {{.*}}replica_groups = dense<{{\[\[}}0, 1], [2, 3]]> : tensor<2x2xi64>, use_global_device_ids}>
// CHECK-SAME: -> tensor<4x4xf32>
// CHECK: %[[T:.*]] = stablehlo.transpose %[[B]]
// CHECK: stablehlo.partition_id
// CHECK: stablehlo.constant dense<{{\[\[}}0, 0], [0, 0], [0, 2], [0, 2]]>
// CHECK: stablehlo.dynamic_slice {{.*}} sizes = [1, 2]
// CHECK: stablehlo.dynamic_slice %[[T]], {{.*}} sizes = [4, 2]
module attributes {mhlo.num_partitions = 4 : i32} {
  func.func @main(%x: tensor<4x4xf32> {kiln.sharding = "{\22tiles\22: [2, 2], \22devices\22: [0, 1, 2, 3]}"}) -> (tensor<4x4xf32> {kiln.sharding = "{\22tiles\22: [1, 2], \22devices\22: [0, 1, 2, 3]}"}) {
    %t = stablehlo.transpose %x, dims = [1, 0] : (tensor<4x4xf32>) -> tensor<4x4xf32>
    return %t : tensor<4x4xf32>
  }
}

// -----

// A program without shardings is left alone.
// CHECK-LABEL: func.func @main
// CHECK-SAME: (%arg0: tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT: return %arg0
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}

// -----

// Partial values (Shardy's unreduced axes): a value whose 2 devices each hold a part of it is
// summed (all_reduce over the holders) where the program needs it whole; a result left
// unreduced is the whole value on the first holder and zeros on the other (the partition_id
// table's last column says which partial a device holds).
// CHECK-LABEL: func.func @main
// CHECK-SAME: (%arg0: tensor<4xf32>) -> tensor<4xf32>
// CHECK: "stablehlo.all_reduce"(%arg0) <{{.*}}replica_groups = dense<{{\[\[}}0, 1]]> : tensor<1x2xi64>
// CHECK: stablehlo.add
// CHECK: stablehlo.constant dense<{{\[\[}}0, 0], [0, 1]]>
// CHECK: stablehlo.compare EQ
// CHECK: stablehlo.select
module attributes {mhlo.num_partitions = 2 : i32} {
  func.func @main(%x: tensor<4xf32> {kiln.sharding = "{\22tiles\22: [1], \22devices\22: [0, 1], \22partials\22: 2}"}) -> (tensor<4xf32> {kiln.sharding = "{\22tiles\22: [1], \22devices\22: [0, 1], \22partials\22: 2}"}) {
    %e = stablehlo.exponential %x : tensor<4xf32>
    return %e : tensor<4xf32>
  }
}
