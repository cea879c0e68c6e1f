// RUN: kiln-opt %s --stage codegen | FileCheck %s

// A large elementwise op runs on all cores: the entry stores its operands' addresses in a
// context array and calls the runtime's parallel-for with an outlined body, which rebuilds
// the memrefs and runs the same op on its [begin, end) rows. The broadcast bias operand is
// not sliced (its map does not use the split dimension).
// CHECK-LABEL: func.func @main
// CHECK: %[[F:.*]] = constant @kiln_parallel_body_0 : (!llvm.ptr, i64, i64) -> ()
// CHECK: memref.alloca() : memref<3xi64>
// CHECK: call @kiln_parallel_for(%[[F]], %{{.*}}, %c1024_i64)
// CHECK-NOT: scf.for
// CHECK: return
// CHECK-LABEL: func.func private @kiln_parallel_body_0(%arg0: !llvm.ptr, %arg1: i64, %arg2: i64)
// CHECK: builtin.unrealized_conversion_cast {{.*}} to memref<1024x512xf32, strided<[512, 1]>>
// CHECK: memref.subview {{.*}} to memref<?x512xf32, strided<[512, 1], offset: ?>>
// CHECK: scf.for
// CHECK: math.fma
func.func @main(%x: tensor<1024x512xf32>, %b: tensor<512xf32>) -> tensor<1024x512xf32> {
  %0 = stablehlo.broadcast_in_dim %b, dims = [1] : (tensor<512xf32>) -> tensor<1024x512xf32>
  %1 = stablehlo.add %x, %0 : tensor<1024x512xf32>
  %2 = stablehlo.exponential %1 : tensor<1024x512xf32>
  return %2 : tensor<1024x512xf32>
}
