// (KILN_AMX=0: where the CPU has AMX, bf16 and int8 products would go to the runtime instead)
// RUN: env KILN_AMX=0 kiln-opt %s --pass kiln-protect-contractions --split-input-file | FileCheck %s

// bf16 x bf16 -> f32 (preferred_element_type): OpenBLAS has no bf16 gemm, so each operand is
// widened to f32 (exactly, O(n^2)) and the product becomes a pure f32 contraction, outlined
// like any other for the sgemm call. The zero fill moves next to it (beta = 0 later).
// CHECK-LABEL: func.func @main
// CHECK: arith.extf %{{.*}} : bf16 to f32
// CHECK: arith.extf %{{.*}} : bf16 to f32
// CHECK: %[[ZERO:.*]] = linalg.fill
// CHECK-NEXT: call @kiln_contraction_0(%{{.*}}, %{{.*}}, %[[ZERO]]) : (tensor<128x96xf32>, tensor<96x64xf32>, tensor<128x64xf32>)
// CHECK: func.func private @kiln_contraction_0
// CHECK: linalg.contract
func.func @main(%a: tensor<128x96xbf16>, %b: tensor<96x64xbf16>) -> tensor<128x64xf32> {
  %cst = arith.constant 0.000000e+00 : f32
  %0 = tensor.empty() : tensor<128x64xf32>
  %1 = linalg.fill ins(%cst : f32) outs(%0 : tensor<128x64xf32>) -> tensor<128x64xf32>
  %2 = linalg.matmul ins(%a, %b : tensor<128x96xbf16>, tensor<96x64xbf16>) outs(%1 : tensor<128x64xf32>) -> tensor<128x64xf32>
  return %2 : tensor<128x64xf32>
}

// -----

// int8 x int8 -> int32 with K = 1024: every partial sum is at most 1024 * 128 * 128 = 2^24 in
// magnitude, an exact f32, so sgemm gives the exact sum; it is converted back and added to
// the accumulator (not a zero fill), wrapping as int32 arithmetic does.
// CHECK-LABEL: func.func @main
// CHECK: arith.sitofp %{{.*}} : i8 to f32
// CHECK: arith.sitofp %{{.*}} : i8 to f32
// CHECK: call @kiln_contraction_0
// CHECK: linalg.generic
// CHECK: arith.fptosi %{{.*}} : f32 to i32
// CHECK-NEXT: arith.addi
// CHECK: func.func private @kiln_contraction_0(%{{.*}}: tensor<64x1024xf32>
func.func @main(%a: tensor<64x1024xi8>, %b: tensor<1024x64xi8>, %acc: tensor<64x64xi32>) -> tensor<64x64xi32> {
  %0 = linalg.matmul ins(%a, %b : tensor<64x1024xi8>, tensor<1024x64xi8>) outs(%acc : tensor<64x64xi32>) -> tensor<64x64xi32>
  return %0 : tensor<64x64xi32>
}

// -----

// K = 1025 can pass 2^24: the depth is split into two chunks (513 + 512), each an exact
// sgemm into its own f32 tensor; their sums are added as integers. A zero initial value adds
// nothing.
// CHECK-LABEL: func.func @main
// CHECK: arith.sitofp %{{.*}} : i8 to f32
// CHECK: tensor.extract_slice %{{.*}}[0, 0] [64, 513] [1, 1]
// CHECK: tensor.extract_slice %{{.*}}[0, 0] [513, 64] [1, 1]
// CHECK: call @kiln_contraction_0
// CHECK: tensor.extract_slice %{{.*}}[0, 513] [64, 512] [1, 1]
// CHECK: tensor.extract_slice %{{.*}}[513, 0] [512, 64] [1, 1]
// CHECK: call @kiln_contraction_1
// CHECK: ^bb0(%[[P0:.*]]: f32, %[[P1:.*]]: f32, %{{.*}}: i32):
// CHECK-NEXT: %[[S0:.*]] = arith.fptosi %[[P0]] : f32 to i32
// CHECK-NEXT: %[[S1:.*]] = arith.fptosi %[[P1]] : f32 to i32
// CHECK-NEXT: %[[SUM:.*]] = arith.addi %[[S0]], %[[S1]] : i32
// CHECK-NEXT: linalg.yield %[[SUM]]
func.func @main(%a: tensor<64x1025xi8>, %b: tensor<1025x64xi8>) -> tensor<64x64xi32> {
  %c0 = arith.constant 0 : i32
  %0 = tensor.empty() : tensor<64x64xi32>
  %1 = linalg.fill ins(%c0 : i32) outs(%0 : tensor<64x64xi32>) -> tensor<64x64xi32>
  %2 = linalg.matmul ins(%a, %b : tensor<64x1025xi8>, tensor<1025x64xi8>) outs(%1 : tensor<64x64xi32>) -> tensor<64x64xi32>
  return %2 : tensor<64x64xi32>
}

// -----

// int16 products reach 2^30 each: no chunk keeps f32 exact, so f64 (exact below 2^53), back
// through i64, wrapped to i32.
// CHECK-LABEL: func.func @main
// CHECK: arith.sitofp %{{.*}} : i16 to f64
// CHECK: call @kiln_contraction_0
// CHECK: arith.fptosi %{{.*}} : f64 to i64
// CHECK-NEXT: arith.trunci %{{.*}} : i64 to i32
// CHECK-NOT: arith.addi
// CHECK: func.func private @kiln_contraction_0(%{{.*}}: tensor<64x128xf64>
func.func @main(%a: tensor<64x128xi16>, %b: tensor<128x64xi16>) -> tensor<64x64xi32> {
  %c0 = arith.constant 0 : i32
  %0 = tensor.empty() : tensor<64x64xi32>
  %1 = linalg.fill ins(%c0 : i32) outs(%0 : tensor<64x64xi32>) -> tensor<64x64xi32>
  %2 = linalg.matmul ins(%a, %b : tensor<64x128xi16>, tensor<128x64xi16>) outs(%1 : tensor<64x64xi32>) -> tensor<64x64xi32>
  return %2 : tensor<64x64xi32>
}

// -----

// An operand that is a zero extension of uint8 (as kiln-fix-semantics widens unsigned dot
// operands) is read from the uint8 tensor: |x| <= 255, and 256 * 255 * 255 < 2^24 keeps f32.
// CHECK-LABEL: func.func @main
// CHECK: arith.uitofp %{{.*}} : i8 to f32
// CHECK: arith.uitofp %{{.*}} : i8 to f32
// CHECK: call @kiln_contraction_0
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @main(%a: tensor<64x256xi8>, %b: tensor<256x64xi8>) -> tensor<64x64xi32> {
  %ea = tensor.empty() : tensor<64x256xi16>
  %wa = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%a : tensor<64x256xi8>) outs(%ea : tensor<64x256xi16>) {
  ^bb0(%in: i8, %out: i16):
    %x = arith.extui %in : i8 to i16
    linalg.yield %x : i16
  } -> tensor<64x256xi16>
  %eb = tensor.empty() : tensor<256x64xi16>
  %wb = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%b : tensor<256x64xi8>) outs(%eb : tensor<256x64xi16>) {
  ^bb0(%in: i8, %out: i16):
    %x = arith.extui %in : i8 to i16
    linalg.yield %x : i16
  } -> tensor<256x64xi16>
  %c0 = arith.constant 0 : i32
  %0 = tensor.empty() : tensor<64x64xi32>
  %1 = linalg.fill ins(%c0 : i32) outs(%0 : tensor<64x64xi32>) -> tensor<64x64xi32>
  %2 = linalg.matmul ins(%wa, %wb : tensor<64x256xi16>, tensor<256x64xi16>) outs(%1 : tensor<64x64xi32>) -> tensor<64x64xi32>
  return %2 : tensor<64x64xi32>
}

// -----

// Left alone: a matrix-vector product reads each matrix element once (a widened copy would
// cost as much as the product), and int32 operands could reach 2^62 (no exact float).
// CHECK-LABEL: func.func @main
// CHECK-NOT: arith.extf
// CHECK-NOT: arith.sitofp
// CHECK: linalg.matvec
// CHECK: linalg.matmul
func.func @main(%m: tensor<512x512xbf16>, %v: tensor<512xbf16>, %init: tensor<512xf32>,
                %a: tensor<64x64xi32>, %acc: tensor<64x64xi32>) -> (tensor<512xf32>, tensor<64x64xi32>) {
  %0 = linalg.matvec ins(%m, %v : tensor<512x512xbf16>, tensor<512xbf16>) outs(%init : tensor<512xf32>) -> tensor<512xf32>
  %1 = linalg.matmul ins(%a, %a : tensor<64x64xi32>, tensor<64x64xi32>) outs(%acc : tensor<64x64xi32>) -> tensor<64x64xi32>
  return %0, %1 : tensor<512xf32>, tensor<64x64xi32>
}
