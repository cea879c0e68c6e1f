"""top_k as an O(n) selection (lowering/legalize/top_k.py) against JAX on CPU: the same
values and indices bit for bit, ties (lower index first), NaN, -0.0/+0.0 and every element
type; approx_max_k/approx_min_k (ApproxTopK) and the sort path for large k."""
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax import lax

import kiln
import re

pytestmark = pytest.mark.usefixtures("jax_x64")  # 64-bit reference results


# The merge sort's innermost loop carries two run positions; the selection carries none.
_MERGE_LOOP = re.compile(r"-> \(index, index, tensor<")


def compare(fn, *args, dump_dir=None):
    # jax.export's module: ApproxTopK's comparator is a private function there, which
    # kiln-lower-jax-custom-calls expects (the jit text of it crashes MLIR's inliner).
    text = jax.export.export(jax.jit(fn))(*args).mlir_module()
    got = kiln.compile(text, dump_dir=dump_dir)(*[np.array(a, copy=True) for a in args])
    want = jax.jit(fn)(*args)
    want = want if isinstance(want, (tuple, list)) else (want,)
    for g, w in zip(got, want):
        w = np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g, w)
        if g.dtype.kind == "f":  # which zero, and NaN payload placement, matter too
            np.testing.assert_array_equal(np.signbit(g), np.signbit(w))


def sorts_after_legalize(dump_dir) -> bool:
    """Whether the legalized program still has a merge sort (read from the stage dump)."""
    (legalized,) = list(dump_dir.glob("*.legalize.mlir"))
    return _MERGE_LOOP.search(legalized.read_text()) is not None


@pytest.mark.parametrize("k", [1, 3, 8, 17, 32])
def test_random_rows(k, tmp_path):
    x = np.random.default_rng(k).standard_normal((37, 129)).astype(np.float32)
    compare(lambda a: lax.top_k(a, k), x, dump_dir=tmp_path)
    assert not sorts_after_legalize(tmp_path)


def test_ties_take_the_lower_index_first():
    x = np.random.default_rng(1).integers(0, 4, (64, 100)).astype(np.float32)
    compare(lambda a: lax.top_k(a, 9), x)


def test_nan_signed_zero_and_infinities_in_total_order():
    rng = np.random.default_rng(2)
    pool = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 3e38, -3e38,
                     1e-45, -1e-45], np.float32)
    x = rng.choice(pool, (50, 40))
    compare(lambda a: lax.top_k(a, 7), x)
    zeros = np.array([[0.0, -0.0, -0.0, 0.0, -1.0, -0.0]] * 2, np.float32)
    compare(lambda a: lax.top_k(a, 4), zeros)


def test_sorted_and_reversed_input_worst_case():
    up = np.tile(np.arange(300, dtype=np.float32), (3, 1))
    compare(lambda a: lax.top_k(a, 32), up)
    compare(lambda a: lax.top_k(a, 32), up[:, ::-1].copy())


@pytest.mark.parametrize("dtype", [np.float64, np.float16, ml_dtypes.bfloat16, np.int32,
                                   np.int64, np.uint8, np.int8, np.uint32])
def test_element_types(dtype):
    rng = np.random.default_rng(3)
    x = rng.integers(-100, 100, (9, 70)) if np.dtype(dtype).kind == "i" else \
        rng.integers(0, 200, (9, 70)) if np.dtype(dtype).kind == "u" else \
        rng.standard_normal((9, 70)) * 10
    compare(lambda a: lax.top_k(a, 5), x.astype(dtype))


def test_batched_3d_and_one_row():
    x = np.random.default_rng(4).standard_normal((3, 4, 50)).astype(np.float32)
    compare(lambda a: lax.top_k(a, 6), x)
    compare(lambda a: lax.top_k(a, 6), x[0, 0])


@pytest.mark.parametrize("k", [49, 50, 33])
def test_large_k_keeps_the_sort(k, tmp_path):
    x = np.random.default_rng(k).standard_normal((5, 50)).astype(np.float32)
    compare(lambda a: lax.top_k(a, k), x, dump_dir=tmp_path)
    assert sorts_after_legalize(tmp_path)


def test_approx_max_and_min_k_are_exact(tmp_path):
    # Distinct values, no NaN: ApproxTopK's comparators are plain GT/LT (not a strict weak
    # order with NaN) and XLA's ApproxTopK does not promise the order of ties.
    x = np.random.default_rng(5).permutation(16 * 300).reshape(16, 300).astype(np.float32)
    compare(lambda a: lax.approx_max_k(a, 8), x, dump_dir=tmp_path)
    assert not sorts_after_legalize(tmp_path)
    compare(lambda a: lax.approx_min_k(a, 8), x)
    compare(lambda a: lax.approx_max_k(a, 4, reduction_dimension=0), x)


def test_argsort_prefix_and_sort_prefix():
    x = np.random.default_rng(6).integers(0, 10, (20, 90)).astype(np.float32)
    compare(lambda a: jnp.argsort(a, axis=-1, stable=True)[:, :5], x)
    compare(lambda a: jnp.sort(a, axis=0)[:3], x)
