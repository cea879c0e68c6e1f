"""Tokens at the entry boundary (lowering/tuples.py): a token argument or result is an empty
bool array, as JAX passes one; side effects inside still run in order."""
import numpy as np

import kiln

PROGRAM = """
func.func @main(%t: !stablehlo.token, %x: tensor<3xf32>) -> (!stablehlo.token, tensor<3xf32>, !stablehlo.token) {
  %0 = stablehlo.after_all %t : !stablehlo.token
  %1 = stablehlo.multiply %x, %x : tensor<3xf32>
  %2 = stablehlo.after_all %0, %t : !stablehlo.token
  return %0, %1, %2 : !stablehlo.token, tensor<3xf32>, !stablehlo.token
}"""


def test_tokens_in_and_out_are_empty_bool_arrays():
    exe = kiln.compile(PROGRAM)
    assert [str(s.dtype) for s in exe.in_avals] == ["bool", "float32"]
    assert [s.shape for s in exe.in_avals] == [(0,), (3,)]
    x = np.array([1.0, -2.0, 3.0], np.float32)
    first, product, last = exe(np.zeros(0, bool), x)
    np.testing.assert_array_equal(product, x * x)
    for token in (first, last):
        assert token.dtype == np.bool_ and token.shape == (0,)


def test_hlo_token_parameters_become_empty_arrays_too():
    hlo = """HloModule tokens

ENTRY main {
  t = token[] parameter(0)
  x = f32[2]{0} parameter(1)
  y = f32[2]{0} negate(x)
  a = token[] after-all(t)
  ROOT r = (f32[2]{0}, token[]) tuple(y, a)
}"""
    y, token = kiln.compile(hlo)(np.zeros(0, bool), np.array([1.0, 2.0], np.float32))
    np.testing.assert_array_equal(y, [-1.0, -2.0])
    assert token.shape == (0,)
