"""while/if/case/composite/optimization_barrier/get_dimension_size, lowered to scf."""
import numpy as np
import pytest

import kiln
from conftest import INTERPRET, assert_checks_pass, shared_file

WHILE = """func.func @main(%n: tensor<i64>, %v: tensor<3xui32>) -> (tensor<i64>, tensor<3xui32>) {
  %zero = stablehlo.constant dense<0> : tensor<i64>
  %one = stablehlo.constant dense<1> : tensor<i64>
  %r0, %r1 = stablehlo.while(%i = %zero, %acc = %v) : tensor<i64>, tensor<3xui32>
  cond {
    %c = stablehlo.compare LT, %i, %n : (tensor<i64>, tensor<i64>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  } do {
    %i1 = stablehlo.add %i, %one : tensor<i64>
    %a1 = stablehlo.multiply %acc, %acc : tensor<3xui32>
    stablehlo.return %i1, %a1 : tensor<i64>, tensor<3xui32>
  }
  return %r0, %r1 : tensor<i64>, tensor<3xui32>
}"""


@pytest.mark.parametrize("n", [0, 1, 3])
def test_while_multi_value_unsigned_carries(n):
    v = np.array([2, 3, 70000], np.uint32)
    count, acc = kiln.compile(WHILE)(np.array(n, np.int64), v)
    want = v.copy()
    for _ in range(n):
        want = want * want  # wraps modulo 2^32 like ui32
    assert count == n
    np.testing.assert_array_equal(acc, want)


NESTED = """func.func @main(%n: tensor<i32>) -> tensor<i32> {
  %zero = stablehlo.constant dense<0> : tensor<i32>
  %one = stablehlo.constant dense<1> : tensor<i32>
  %r:2 = stablehlo.while(%i = %zero, %total = %zero) : tensor<i32>, tensor<i32>
  cond {
    %c = stablehlo.compare LT, %i, %n : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  } do {
    %inner:2 = stablehlo.while(%j = %zero, %t = %total) : tensor<i32>, tensor<i32>
    cond {
      %c = stablehlo.compare LT, %j, %i : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %c : tensor<i1>
    } do {
      %j1 = stablehlo.add %j, %one : tensor<i32>
      %t1 = stablehlo.add %t, %one : tensor<i32>
      stablehlo.return %j1, %t1 : tensor<i32>, tensor<i32>
    }
    %i1 = stablehlo.add %i, %one : tensor<i32>
    stablehlo.return %i1, %inner#1 : tensor<i32>, tensor<i32>
  }
  return %r#1 : tensor<i32>
}"""


def test_nested_while():
    assert kiln.compile(NESTED)(np.array(5, np.int32))[0] == 0 + 1 + 2 + 3 + 4


CASE = """func.func @main(%i: tensor<i32>, %x: tensor<2xf32>) -> tensor<2xf32> {
  %0 = "stablehlo.case"(%i) ({
    stablehlo.return %x : tensor<2xf32>
  }, {
    %a = stablehlo.add %x, %x : tensor<2xf32>
    stablehlo.return %a : tensor<2xf32>
  }, {
    %m = stablehlo.negate %x : tensor<2xf32>
    stablehlo.return %m : tensor<2xf32>
  }) : (tensor<i32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}"""


@pytest.mark.parametrize("index,scale", [(0, 1), (1, 2), (2, -1), (3, -1), (-1, -1), (2**31 - 1, -1)])
def test_case_out_of_range_runs_the_last_branch(index, scale):
    x = np.array([1.5, -2.0], np.float32)
    np.testing.assert_array_equal(kiln.compile(CASE)(np.array(index, np.int32), x)[0], scale * x)


IF = """func.func @main(%p: tensor<i1>, %x: tensor<3xi32>) -> (tensor<3xi32>, tensor<i32>) {
  %0:2 = "stablehlo.if"(%p) ({
    %s = stablehlo.constant dense<1> : tensor<i32>
    stablehlo.return %x, %s : tensor<3xi32>, tensor<i32>
  }, {
    %n = stablehlo.negate %x : tensor<3xi32>
    %s = stablehlo.constant dense<2> : tensor<i32>
    stablehlo.return %n, %s : tensor<3xi32>, tensor<i32>
  }) : (tensor<i1>) -> (tensor<3xi32>, tensor<i32>)
  return %0#0, %0#1 : tensor<3xi32>, tensor<i32>
}"""


@pytest.mark.parametrize("pred", [True, False])
def test_if_with_two_results(pred):
    x = np.array([1, -2, 3], np.int32)
    out, which = kiln.compile(IF)(np.array(pred), x)
    np.testing.assert_array_equal(out, x if pred else -x)
    assert which == (1 if pred else 2)


def test_barrier_dimension_size_and_composite():
    src = """func.func @main(%x: tensor<4x3xf32>) -> (tensor<4x3xf32>, tensor<i32>, tensor<4x3xf32>) {
      %b:2 = stablehlo.optimization_barrier %x, %x : tensor<4x3xf32>, tensor<4x3xf32>
      %d = stablehlo.get_dimension_size %b#0, dim = 1 : (tensor<4x3xf32>) -> tensor<i32>
      %c = stablehlo.composite "kiln.double" %b#1 {decomposition = @double} : (tensor<4x3xf32>) -> tensor<4x3xf32>
      return %b#0, %d, %c : tensor<4x3xf32>, tensor<i32>, tensor<4x3xf32>
    }
    func.func private @double(%y: tensor<4x3xf32>) -> tensor<4x3xf32> {
      %0 = stablehlo.add %y, %y : tensor<4x3xf32>
      return %0 : tensor<4x3xf32>
    }"""
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    out, dim, doubled = kiln.compile(src)(x)
    np.testing.assert_array_equal(out, x)
    assert dim == 3
    np.testing.assert_array_equal(doubled, 2 * x)


@pytest.mark.parametrize("name", ["random_uniform_.mlir", "random_categorical_float32_5_4.mlir"])
def test_conformance_programs_with_while(name):
    assert_checks_pass(name)


@pytest.mark.parametrize("name", ["while.mlir", "if.mlir", "case.mlir", "composite.mlir",
                                  "optimization_barrier.mlir", "get_dimension_size.mlir"])
def test_interpret_suite(name):
    from kiln.conformance import run_file
    result = run_file(str(shared_file(name, INTERPRET)))
    assert result.passed, result.detail


REDUCE = """func.func @main(%x: tensor<2x5xf32>, %y: tensor<2x5xi32>) -> (tensor<2xf32>, tensor<2xi32>) {
  %z = stablehlo.constant dense<0.5> : tensor<f32>
  %zi = stablehlo.constant dense<100> : tensor<i32>
  %r:2 = stablehlo.reduce(%x init: %z), (%y init: %zi) across dimensions = [1] : (tensor<2x5xf32>, tensor<2x5xi32>, tensor<f32>, tensor<i32>) -> (tensor<2xf32>, tensor<2xi32>)
   reducer(%a: tensor<f32>, %b: tensor<f32>) (%c: tensor<i32>, %d: tensor<i32>) {
    %s = stablehlo.subtract %a, %b : tensor<f32>
    %t = stablehlo.multiply %c, %zi : tensor<i32>
    %u = stablehlo.subtract %t, %d : tensor<i32>
    stablehlo.return %s, %u : tensor<f32>, tensor<i32>
  }
  return %r#0, %r#1 : tensor<2xf32>, tensor<2xi32>
}"""


def test_multi_operand_non_commutative_reduce_matches_the_interpreter():
    # Upstream folds left to right from the init value (acc = body(acc, x)), as the reference
    # interpreter does; the integer body wraps.
    from kiln.reference import evaluate
    x = np.arange(10, dtype=np.float32).reshape(2, 5)
    y = np.arange(10, dtype=np.int32).reshape(2, 5) + 1
    got = kiln.compile(REDUCE)(x, y)
    want = evaluate(REDUCE, [x, y], ["tensor<2x5xf32>", "tensor<2x5xi32>"])
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])
    acc = np.full(2, 0.5, np.float32)
    for j in range(5):
        acc = acc - x[:, j]
    np.testing.assert_array_equal(got[0], acc)
