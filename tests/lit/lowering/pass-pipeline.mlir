// RUN: kiln-opt %s --pass-pipeline 'builtin.module(kiln-lower-sort,canonicalize,func.func(cse))' | FileCheck %s
// RUN: kiln-opt %s --pass kiln-lower-sort,canonicalize,'func.func(cse)' | FileCheck %s
// RUN: not kiln-opt %s --pass kiln-lower-srot 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: not kiln-opt %s --pass-pipeline 'builtin.module(lower-sort)' 2>&1 | FileCheck %s --check-prefix=UPSTREAM
// RUN: not kiln-opt %s --pass 'kiln-lower-sort{entry=main}' 2>&1 | FileCheck %s --check-prefix=OPTION
// RUN: kiln-opt %s --pass 'kiln-emit-c-interface{entry=other}' | FileCheck %s --check-prefix=ENTRY

// Kiln's passes and upstream ones run together in one pipeline: the sort is lowered, then
// canonicalized (its loop bounds fold to constants).
// CHECK-LABEL: func.func @main
// CHECK-NOT: stablehlo.sort
// CHECK: scf.for
// CHECK: stablehlo.compare LT

// A misspelt name is an error naming the close ones, never a traceback.
// UNKNOWN: kiln-opt: error: --pass: unknown pass 'kiln-lower-srot' (did you mean kiln-lower-sort
// UNKNOWN-NOT: Traceback
// UPSTREAM: kiln-opt: error: --pass-pipeline: unknown pass 'lower-sort': {{.*}} (did you mean kiln-lower-sort
// UPSTREAM-NOT: Traceback
// OPTION: kiln-opt: error: --pass: pass 'kiln-lower-sort' has no option 'entry=main' (it takes no options)

// Passes on the entry function take it as an option.
// ENTRY-LABEL: func.func @main
// ENTRY-NOT: llvm.emit_c_interface
// ENTRY-LABEL: func.func @other
// ENTRY-SAME: llvm.emit_c_interface
func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "stablehlo.sort"(%a) ({
  ^bb0(%x: tensor<f32>, %y: tensor<f32>):
    %c = stablehlo.compare LT, %x, %y : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  }) {dimension = 0 : i64, is_stable = true} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
func.func @other(%a: tensor<4xf32>) -> tensor<4xf32> {
  return %a : tensor<4xf32>
}
