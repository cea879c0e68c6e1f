// The input check bounds nesting of every bracket kind MLIR's parser recurses on, `<` of
// types and attributes included: 40,000 nested tuple<...> overflowed the parser's stack.
// RUN: %python -c "print('func.func private @g(%%x: ' + 'tuple<' * 40000 + 'f32' + '>' * 40000 + ') -> ()')" > %t.mlir
// RUN: not kiln-opt %t.mlir 2>&1 | FileCheck %s --check-prefix=DEEP
// DEEP: nesting_bound.mlir.tmp.mlir:1:1561: nesting deeper than 256 levels
//
// Closers a parser never sees as closers (in comments, `->`) hide nothing; an alias nests as
// deep as its definition.
// RUN: %python -c "print('// ' + '>' * 500); print('func.func private @g(%%x: ' + 'tuple<' * 300 + 'f32' + '>' * 300 + ') -> ()')" > %t.comment.mlir
// RUN: not kiln-opt %t.comment.mlir 2>&1 | FileCheck %s --check-prefix=COMMENT
// COMMENT: nesting_bound.mlir.tmp.comment.mlir:2:1561: nesting deeper than 256 levels
// RUN: %python -c "print('!t0 = f32'); [print(f'!t{i} = tuple<!t{i-1}>') for i in range(1, 300)]; print('func.func private @g(%%x: !t299) -> ()')" > %t.alias.mlir
// RUN: not kiln-opt %t.alias.mlir 2>&1 | FileCheck %s --check-prefix=ALIAS
// ALIAS: nesting_bound.mlir.tmp.alias.mlir:{{[0-9]+}}:1: nesting deeper than 256 levels (through alias !t{{[0-9]+}})
//
// A program nested within the bound reads as before.
// RUN: kiln-opt %s | FileCheck %s
// CHECK: func.func private @shallow(tuple<tuple<tuple<f32>>>)
func.func private @shallow(%x: tuple<tuple<tuple<f32>>>) -> ()
