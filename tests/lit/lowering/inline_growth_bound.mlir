// Before MLIR's inliner runs, the size each function reaches once its calls are inlined is
// computed from the call graph: functions that call the next one twice, 30 levels deep,
// would build 2^30 copies; the first function past the limit is named, where it is.
// RUN: %python -c "exec(\"print('func.func @main(%%a: tensor<f32>) -> tensor<f32> {\\\\n  %%r = call @f0(%%a) : (tensor<f32>) -> tensor<f32>\\\\n  return %%r : tensor<f32>\\\\n}')\\nfor k in range(29): print(f'func.func private @f{k}(%%a: tensor<f32>) -> tensor<f32> {{\\\\n  %%x = call @f{k+1}(%%a) : (tensor<f32>) -> tensor<f32>\\\\n  %%y = call @f{k+1}(%%x) : (tensor<f32>) -> tensor<f32>\\\\n  return %%y : tensor<f32>\\\\n}}')\\nprint('func.func private @f29(%%a: tensor<f32>) -> tensor<f32> {\\\\n  return %%a : tensor<f32>\\\\n}')\")" > %t.mlir
// RUN: not kiln-opt %t.mlir --pass inline 2>&1 | FileCheck %s --check-prefix=GROWTH
// GROWTH: inline_growth_bound.mlir.tmp.mlir:{{[0-9]+}}:1: inlining the program's calls would build more than 2097152 operations (@f{{[0-9]+}} alone grows from 5 to {{[0-9]+}})
//
// A chain of calls deeper than 1024 levels is refused where it crosses the bound.
// RUN: %python -c "exec(\"for k in range(1100): print(f'func.func private @f{k}(%%a: tensor<f32>) -> tensor<f32> {{\\\\n  %%x = call @f{k+1}(%%a) : (tensor<f32>) -> tensor<f32>\\\\n  return %%x : tensor<f32>\\\\n}}')\\nprint('func.func private @f1100(%%a: tensor<f32>) -> tensor<f32> {\\\\n  return %%a : tensor<f32>\\\\n}')\")" > %t.chain.mlir
// RUN: not kiln-opt %t.chain.mlir --pass inline 2>&1 | FileCheck %s --check-prefix=DEPTH
// DEPTH: inline_growth_bound.mlir.tmp.chain.mlir:{{[0-9]+}}:1: @f75 starts a chain of calls 1025 deep; Kiln inlines at most 1024 levels
//
// Calls within the bounds inline as before.
// RUN: kiln-opt %s --pass inline | FileCheck %s
// CHECK-LABEL: func.func @main
// CHECK-NEXT: stablehlo.add
// CHECK-NEXT: stablehlo.add
// CHECK-NEXT: return
func.func @main(%a: tensor<f32>) -> tensor<f32> {
  %0 = call @twice(%a) : (tensor<f32>) -> tensor<f32>
  return %0 : tensor<f32>
}
func.func private @twice(%a: tensor<f32>) -> tensor<f32> {
  %0 = call @once(%a) : (tensor<f32>) -> tensor<f32>
  %1 = call @once(%0) : (tensor<f32>) -> tensor<f32>
  return %1 : tensor<f32>
}
func.func private @once(%a: tensor<f32>) -> tensor<f32> {
  %0 = stablehlo.add %a, %a : tensor<f32>
  return %0 : tensor<f32>
}
