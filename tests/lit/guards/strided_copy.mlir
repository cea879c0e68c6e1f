// RUN: kiln-opt %s --stage codegen | FileCheck %s

// pad writes its operand through a strided subview. As a memref.copy that became a call of
// `memrefCopy`, a symbol the JIT cannot resolve (the process then jumped to address 0); it is
// a loop nest instead.
// CHECK-LABEL: func.func @main
// CHECK: memref.subview {{.*}} to memref<2x3xi8, strided<[8, 1], offset: 4>>
// CHECK-NOT: memref.copy {{.*}}strided
// CHECK: scf.for
func.func @main(%x: tensor<2x3xi8>) -> tensor<6x4xi8> {
  %p = stablehlo.constant dense<7> : tensor<i8>
  %0 = stablehlo.pad %x, %p, low = [1, 0], high = [2, 1], interior = [1, 0] : (tensor<2x3xi8>, tensor<i8>) -> tensor<6x4xi8>
  return %0 : tensor<6x4xi8>
}
