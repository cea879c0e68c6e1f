"""The common-case call path (driver/fast_call.py) gives what the general path gives, and
hands every other kind of call to the general path."""
import numpy as np
import pytest

import kiln
from kiln.errors import KilnError

ADD = """
func.func @main(%a: tensor<2x3xf32>, %b: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>) {
  %s = stablehlo.add %a, %b : tensor<2x3xf32>
  %m = stablehlo.multiply %a, %b : tensor<2x3xf32>
  return %s, %m : tensor<2x3xf32>, tensor<2x3xf32>
}
"""


@pytest.fixture(scope="module")
def exe():
    return kiln.compile(ADD)


def test_the_fast_path_is_taken_and_agrees(exe):
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.full((2, 3), 2.5, np.float32)
    first = exe(a, b)  # the general path decides the fast one
    assert exe._fast is not None and exe._fast((a, b)) is not None
    second = exe(a, b)
    for got in (first, second):
        assert isinstance(got, tuple) and len(got) == 2
        np.testing.assert_array_equal(got[0], a + b)
        np.testing.assert_array_equal(got[1], a * b)
    # fresh result buffers every call: the caller may keep them
    assert second[0] is not first[0] and not np.shares_memory(second[0], first[0])


@pytest.mark.parametrize("make", [
    lambda a: a.tolist(),                                      # Python lists
    lambda a: np.asfortranarray(a),                            # not C-contiguous
    lambda a: np.repeat(a, 2, axis=1)[:, ::2],                 # a strided view
    lambda a: np.float32(1.0) * a,                             # an ordinary array again
])
def test_other_arguments_take_the_general_path(exe, make):
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    exe(a, a)
    got = exe(make(a), a)
    np.testing.assert_array_equal(got[0], a + a)


def test_wrong_arguments_still_get_the_general_paths_errors(exe):
    a = np.ones((2, 3), np.float32)
    exe(a, a)
    with pytest.raises(KilnError, match="float32"):
        exe(a.astype(np.float64), a)
    with pytest.raises(KilnError, match="argument"):
        exe(a)
    with pytest.raises(KilnError):
        exe(np.ones((3, 2), np.float32), a)


def test_programs_with_checks_never_take_it():
    exe = kiln.compile("""
func.func @main() {
  %c = stablehlo.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %d = stablehlo.add %c, %c : tensor<2xf32>
  check.expect_eq_const %d, dense<[2.0, 5.0]> : tensor<2xf32>
  return
}
""")
    with pytest.raises(kiln.CheckFailure):
        exe()
    assert exe._fast is not None and exe._fast(()) is None
    with pytest.raises(kiln.CheckFailure):
        exe()


def test_jax_exports_with_pytrees_take_it_and_agree_with_jax():
    import jax
    import jax.numpy as jnp

    def f(params, x):
        return {"y": jnp.tanh(x @ params["w"] + params["b"]), "n": (x.sum(), x.max())}

    rng = np.random.default_rng(0)
    params = {"w": rng.standard_normal((4, 3), np.float32), "b": np.ones(3, np.float32)}
    x = rng.standard_normal((2, 4), np.float32)
    exported = jax.export.export(jax.jit(f))(params, x)
    exe = kiln.compile(bytes(exported.serialize()))
    want = jax.jit(f)(params, x)
    for _ in range(2):
        got = exe(params, x)
        assert set(got) == {"y", "n"} and isinstance(got["n"], tuple)
        np.testing.assert_allclose(got["y"], want["y"], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(got["n"][0], want["n"][0], rtol=1e-5)
        np.testing.assert_allclose(got["n"][1], want["n"][1], rtol=1e-5)
    assert exe._fast((params, x)) is not None
    with pytest.raises(KilnError, match="dict"):
        exe({"w": params["w"]}, x)  # a missing leaf: the general path's error
