"""rng_bit_generator bit-exact against jax (XLA), and stablehlo.rng's distributions."""
import numpy as np
import pytest

import kiln

jax = pytest.importorskip("jax")
from jax import lax  # noqa: E402

ALGS = {"THREE_FRY": lax.RandomAlgorithm.RNG_THREE_FRY, "PHILOX": lax.RandomAlgorithm.RNG_PHILOX}
KEYS = [[1, 4, 0, 1], [0x9ABCDEF0, 0x12345678, 0x87654321, 0x0FEDCBA9], [7, 0, 0xFFFFFFFF, 0]]


def _program(alg, shape, elem):
    t = "tensor<" + "".join(f"{d}x" for d in shape) + elem + ">"
    return (f"func.func @main(%k: tensor<2xui64>) -> (tensor<2xui64>, {t}) {{\n"
            f"  %0:2 = stablehlo.rng_bit_generator %k, algorithm = {alg} : (tensor<2xui64>) -> (tensor<2xui64>, {t})\n"
            f"  return %0#0, %0#1 : tensor<2xui64>, {t}\n}}")


@pytest.mark.parametrize("alg", sorted(ALGS))
@pytest.mark.parametrize("shape,elem,dtype", [((4,), "ui32", np.uint32), ((7,), "ui32", np.uint32),
                                              ((3, 5), "ui32", np.uint32), ((2, 3), "ui8", np.uint8),
                                              ((5,), "ui16", np.uint16)])
def test_rng_bit_generator_matches_xla(alg, shape, elem, dtype):
    exe = kiln.compile(_program(alg, shape, elem))
    for k in KEYS:
        key = np.array(k, np.uint32)  # jax's key: u32[4], i.e. the u64[2] state's bytes
        want_state, want_bits = lax.rng_bit_generator(key, shape, dtype=dtype, algorithm=ALGS[alg])
        state, bits = exe(key.view(np.uint64))
        np.testing.assert_array_equal(bits, np.asarray(want_bits))
        np.testing.assert_array_equal(state.view(np.uint32), np.asarray(want_state))


def _rng(dist, a, b, shape, elem="f32"):
    t = "tensor<" + "".join(f"{d}x" for d in shape) + elem + ">"
    src = (f"func.func @main() -> {t} {{\n"
           f"  %a = stablehlo.constant dense<{a}> : tensor<{elem}>\n"
           f"  %b = stablehlo.constant dense<{b}> : tensor<{elem}>\n"
           f"  %s = stablehlo.constant dense<{list(shape)}> : tensor<{len(shape)}xi64>\n"
           f"  %0 = stablehlo.rng %a, %b, %s, distribution = {dist} : (tensor<{elem}>, tensor<{elem}>, "
           f"tensor<{len(shape)}xi64>) -> {t}\n  return %0 : {t}\n}}")
    return kiln.compile(src)()[0]


def test_uniform_in_range_flat_and_uncorrelated():
    u = _rng("UNIFORM", 2.0, 3.0, (200, 100)).ravel()
    assert u.min() >= 2.0 and u.max() < 3.0
    counts = np.histogram(u, bins=10, range=(2, 3))[0]
    assert counts.min() > 0.9 * u.size / 10 and counts.max() < 1.1 * u.size / 10
    assert abs(np.corrcoef(u[:-1], u[1:])[0, 1]) < 0.05


@pytest.mark.parametrize("elem", ["f32", "f64", "bf16"])
def test_normal_moments(elem):
    z = _rng("NORMAL", 2.0, 3.0, (100, 100), elem).astype(np.float64).ravel()
    assert np.all(np.isfinite(z))
    assert abs(z.mean() - 2.0) < 0.1 and abs(z.std() - 3.0) < 0.1
    assert abs(np.mean(((z - 2) / 3) ** 3)) < 0.1           # symmetric
    assert abs(np.mean(((z - 2) / 3) ** 4) - 3.0) < 0.2     # normal kurtosis
