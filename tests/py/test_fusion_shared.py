"""kiln-fuse-shared-elementwise (lowering/fusion.py): DAGs of cheap elementwise ops (threefry
rounds) become one loop per result, with results bit-identical to JAX."""
import jax
import jax.numpy as jnp
import numpy as np

import kiln


def compile_jax(fn, *args, dump_dir=None):
    text = jax.jit(fn).lower(*args).as_text()
    return kiln.compile(text, dump_dir=dump_dir)


def generics_in_loops(dump_dir) -> int:
    (bufferized,) = list(dump_dir.glob("*.bufferize.mlir"))
    return bufferized.read_text().count("linalg.generic")


def test_threefry_bits_and_normal_match_jax_exactly(tmp_path):
    key = np.asarray(jax.random.key_data(jax.random.PRNGKey(42)))

    def f(k):
        key = jax.random.wrap_key_data(k)
        return jax.random.bits(key, (1000,), jnp.uint32), jax.random.normal(key, (777,))
    exe = compile_jax(f, key, dump_dir=tmp_path)
    got = exe(key)
    want = jax.jit(f)(key)
    np.testing.assert_array_equal(got[0], np.asarray(want[0]))
    np.testing.assert_allclose(got[1], np.asarray(want[1]), rtol=2e-6, atol=2e-6)
    # The rounds' DAG fused: 2 loops per threefry call (one per output word) instead of
    # one per op (measured 16 before this pass).
    assert generics_in_loops(tmp_path) <= 14


def test_shared_integer_dag_is_exact_and_fused(tmp_path):
    rng = np.random.default_rng(0)
    a = rng.integers(0, 2**31, 4096, dtype=np.int64).astype(np.uint32)
    b = rng.integers(0, 2**31, 4096, dtype=np.int64).astype(np.uint32)

    def rounds(x, y):
        for r in (13, 15, 26, 6):
            x = x + y
            y = ((y << r) | (y >> (32 - r))) ^ x
        return x, y
    exe = compile_jax(rounds, a, b, dump_dir=tmp_path)
    got = exe(a, b)
    want = jax.jit(rounds)(a, b)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, np.asarray(w))
    assert generics_in_loops(tmp_path) == 2   # one loop per result, not one per round


def test_float_dag_with_shared_values_matches_jax():
    x = np.linspace(-3, 3, 1001, dtype=np.float32)

    def f(x):
        s = x * 0.5 + 1.0
        return s * s - x, jnp.maximum(s, x) * s
    got = compile_jax(f, x)(x)
    # Within one ulp: a fused body lets LLVM contract a multiply-add into an fma (as
    # upstream's single-user fusion already does).
    for g, w in zip(got, jax.jit(f)(x)):
        np.testing.assert_array_max_ulp(g, np.asarray(w), maxulp=1)


# torch_xla's nn.Upsample(scale_factor=2): an outer product (dot_general without contracting
# dimensions: `out + a * b` over a zero fill) feeding a product with more loops. Upstream
# fusion kept the outer product's output inside the fused loop nest and added into it once
# per extra iteration (2x the value in the second channel) until kiln-read-outputs-as-inputs.
OUTER_PRODUCT_INTO_A_WIDER_LOOP = """
func.func @main(%u: tensor<8x1xf32>, %b: tensor<1x1x1x2x8x8xf32>) -> tensor<8x8x1x2xf32> {
  %p = stablehlo.dot_general %u, %u, contracting_dims = [] x [], precision = [DEFAULT, DEFAULT] : (tensor<8x1xf32>, tensor<8x1xf32>) -> tensor<8x1x8x1xf32>
  %0 = stablehlo.dot_general %p, %b, batching_dims = [2, 0] x [4, 5], contracting_dims = [3, 1] x [1, 2], precision = [DEFAULT, DEFAULT] : (tensor<8x1x8x1xf32>, tensor<1x1x1x2x8x8xf32>) -> tensor<8x8x1x2xf32>
  return %0 : tensor<8x8x1x2xf32>
}"""


def test_an_outer_product_fused_into_a_wider_loop_is_computed_once(rng):
    u = rng.standard_normal((8, 1)).astype(np.float32)
    b = rng.standard_normal((1, 1, 1, 2, 8, 8)).astype(np.float32)
    (got,) = kiln.compile(OUTER_PRODUCT_INTO_A_WIDER_LOOP)(u, b)
    outer = u[:, 0][:, None] * u[:, 0][None, :]                      # [i, j]
    want = np.einsum("ji,cij->ijc", outer, b[0, 0, 0])[:, :, None, :]  # [i, j, 0, c]
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
