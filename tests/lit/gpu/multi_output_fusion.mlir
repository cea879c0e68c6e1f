// RUN: kiln-opt %s --split-input-file --pass kiln-gpu-multi-output-fusion | FileCheck %s

// A producer returned and also read by its consumer: one generic writes both results.
// CHECK-LABEL: func.func @returned_and_consumed
// CHECK: %[[F:.*]]:2 = linalg.generic
// CHECK-SAME: ins(%arg0, %arg0 : tensor<64xf32>, tensor<64xf32>)
// CHECK: %[[E:.*]] = math.exp
// CHECK: %[[M:.*]] = arith.mulf %[[E]], %[[E]]
// CHECK: %[[A:.*]] = arith.addf %[[M]]
// CHECK: linalg.yield %[[E]], %[[A]]
// CHECK-NOT: linalg.generic
// CHECK: return %[[F]]#0, %[[F]]#1
#id = affine_map<(d0) -> (d0)>
func.func @returned_and_consumed(%x: tensor<64xf32>) -> (tensor<64xf32>, tensor<64xf32>) {
  %e = tensor.empty() : tensor<64xf32>
  %y = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%x : tensor<64xf32>) outs(%e : tensor<64xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = math.exp %a : f32
    linalg.yield %r : f32
  } -> tensor<64xf32>
  %w = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]}
      ins(%y, %x : tensor<64xf32>, tensor<64xf32>) outs(%e : tensor<64xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %a : f32
    %s = arith.addf %m, %b : f32
    linalg.yield %s : f32
  } -> tensor<64xf32>
  return %y, %w : tensor<64xf32>, tensor<64xf32>
}

// -----

// The consumer reads the producer transposed: not one iteration space, left alone.
// CHECK-LABEL: func.func @transposed_read
// CHECK-COUNT-2: linalg.generic
#id2 = affine_map<(d0, d1) -> (d0, d1)>
#tr = affine_map<(d0, d1) -> (d1, d0)>
func.func @transposed_read(%x: tensor<8x8xf32>) -> (tensor<8x8xf32>, tensor<8x8xf32>) {
  %e = tensor.empty() : tensor<8x8xf32>
  %y = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<8x8xf32>) outs(%e : tensor<8x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = math.exp %a : f32
    linalg.yield %r : f32
  } -> tensor<8x8xf32>
  %w = linalg.generic {indexing_maps = [#tr, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%y : tensor<8x8xf32>) outs(%e : tensor<8x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.mulf %a, %a : f32
    linalg.yield %m : f32
  } -> tensor<8x8xf32>
  return %y, %w : tensor<8x8xf32>, tensor<8x8xf32>
}

// -----

// A reduction consumer (not all-parallel): left alone.
// CHECK-LABEL: func.func @reduction_consumer
// CHECK-COUNT-2: linalg.generic
#in = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @reduction_consumer(%x: tensor<8x8xf32>, %z: tensor<8xf32>) -> (tensor<8x8xf32>, tensor<8xf32>) {
  %e = tensor.empty() : tensor<8x8xf32>
  %y = linalg.generic {indexing_maps = [#in, #in], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<8x8xf32>) outs(%e : tensor<8x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = math.exp %a : f32
    linalg.yield %r : f32
  } -> tensor<8x8xf32>
  %s = linalg.generic {indexing_maps = [#in, #row], iterator_types = ["parallel", "reduction"]}
      ins(%y : tensor<8x8xf32>) outs(%z : tensor<8xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %t = arith.addf %a, %acc : f32
    linalg.yield %t : f32
  } -> tensor<8xf32>
  return %y, %s : tensor<8x8xf32>, tensor<8xf32>
}

// -----

// Another user of the producer's result (a transposing one, which cannot take the producer
// in) comes before the consumer: the fused op could not take the consumer's place, so
// nothing changes.
// CHECK-LABEL: func.func @used_before_the_consumer
// CHECK-COUNT-3: linalg.generic
#i = affine_map<(d0, d1) -> (d0, d1)>
#t = affine_map<(d0, d1) -> (d1, d0)>
func.func @used_before_the_consumer(%x: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
  %e = tensor.empty() : tensor<4x4xf32>
  %y = linalg.generic {indexing_maps = [#i, #i], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x4xf32>) outs(%e : tensor<4x4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = math.exp %a : f32
    linalg.yield %r : f32
  } -> tensor<4x4xf32>
  %u = linalg.generic {indexing_maps = [#t, #i], iterator_types = ["parallel", "parallel"]}
      ins(%y : tensor<4x4xf32>) outs(%e : tensor<4x4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %n = arith.negf %a : f32
    linalg.yield %n : f32
  } -> tensor<4x4xf32>
  %w = linalg.generic {indexing_maps = [#i, #i, #i], iterator_types = ["parallel", "parallel"]}
      ins(%y, %x : tensor<4x4xf32>, tensor<4x4xf32>) outs(%e : tensor<4x4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    linalg.yield %m : f32
  } -> tensor<4x4xf32>
  return %u, %w : tensor<4x4xf32>, tensor<4x4xf32>
}

// -----

// A chain: the producer fused into its first consumer, whose other user comes later.
// CHECK-LABEL: func.func @first_consumer
// CHECK: %[[F:.*]]:2 = linalg.generic
// CHECK: linalg.generic
// CHECK-SAME: ins(%[[F]]#1, %[[F]]#0
#c = affine_map<(d0) -> (d0)>
func.func @first_consumer(%x: tensor<16xf32>) -> (tensor<16xf32>, tensor<16xf32>) {
  %e = tensor.empty() : tensor<16xf32>
  %y = linalg.generic {indexing_maps = [#c, #c], iterator_types = ["parallel"]}
      ins(%x : tensor<16xf32>) outs(%e : tensor<16xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = math.exp %a : f32
    linalg.yield %r : f32
  } -> tensor<16xf32>
  %u = linalg.generic {indexing_maps = [#c, #c], iterator_types = ["parallel"]}
      ins(%y : tensor<16xf32>) outs(%e : tensor<16xf32>) {
  ^bb0(%a: f32, %o: f32):
    %n = arith.negf %a : f32
    linalg.yield %n : f32
  } -> tensor<16xf32>
  %w = linalg.generic {indexing_maps = [#c, #c, #c], iterator_types = ["parallel"]}
      ins(%u, %y : tensor<16xf32>, tensor<16xf32>) outs(%e : tensor<16xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    linalg.yield %m : f32
  } -> tensor<16xf32>
  return %u, %w : tensor<16xf32>, tensor<16xf32>
}

// -----

// The consumer also reads the producer at another position (a sorting network's step):
// fusing would make the fused op read its own result, so nothing changes.
// CHECK-LABEL: func.func @read_at_another_position
// CHECK-COUNT-2: linalg.generic
#p = affine_map<(d0) -> (d0)>
func.func @read_at_another_position(%x: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %e = tensor.empty() : tensor<8xf32>
  %y = linalg.generic {indexing_maps = [#p, #p], iterator_types = ["parallel"]}
      ins(%x : tensor<8xf32>) outs(%e : tensor<8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = math.exp %a : f32
    linalg.yield %r : f32
  } -> tensor<8xf32>
  %w = linalg.generic {indexing_maps = [#p, #p], iterator_types = ["parallel"]}
      ins(%y : tensor<8xf32>) outs(%e : tensor<8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %i = linalg.index 0 : index
    %c7 = arith.constant 7 : index
    %j = arith.subi %c7, %i : index
    %other = tensor.extract %y[%j] : tensor<8xf32>
    %m = arith.maximumf %a, %other : f32
    linalg.yield %m : f32
  } -> tensor<8xf32>
  return %y, %w : tensor<8xf32>, tensor<8xf32>
}
