"""Sort and scatter as parallel GPU kernels (lowering/gpu/sort.py, scatter.py), run by the GPU
emulator against JAX and numpy, and assembled by ptxas for sm_80 and sm_90.

Sorts are bitonic networks, one launch per compare-exchange step over every element: odd
lengths, one element, ties (stable), NaNs under JAX's total order, several operands, custom
and descending comparators, any dimension. Scatters with an atomic combiner, unique indices
or a replacing combiner run a thread per update element; others stay serial and correct."""
from __future__ import annotations

import base64
import json
import re

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax import export

import kiln
from kiln.lowering.gpu.sort import network_masks

MAX_REGISTERS = 255
MAX_STATIC_SHARED = 48 * 1024


def jax_program(f, *args) -> bytes:
    specs = [jax.ShapeDtypeStruct(np.shape(a), np.asarray(a).dtype) for a in args]
    return export.export(jax.jit(f))(*specs).serialize()


def as_tuple(value) -> tuple:
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


def same_bits(got, want) -> None:
    """Equal element for element, bit for bit (NaNs and signed zeros included)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, got.dtype,
                                                                 want.shape, want.dtype)
    width = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[got.dtype.itemsize]
    np.testing.assert_array_equal(got.view(width), want.view(width))


def emulate(f, *args):
    exe = kiln.compile(jax_program(f, *args), target="gpu-emulator")
    return exe, as_tuple(exe(*args))


def check_exact(f, *args):
    exe, got = emulate(f, *args)
    want = as_tuple(f(*[jnp.asarray(a) for a in args]))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        same_bits(g, w)
    return exe


def launches(exe) -> list[str]:
    return [t.name for t in exe.thunks() if t.kind == "kernel-launch"]


@pytest.fixture
def rng():
    return np.random.default_rng(16)


# -- sort ------------------------------------------------------------------------------------

def test_network_masks():
    assert network_masks(2) == [1]
    assert network_masks(3) == network_masks(4) == [1, 3, 1]
    assert network_masks(8) == [1, 3, 1, 7, 2, 1]
    assert len(network_masks(1000)) == 10 * 11 // 2


def _network_reference(keys: list) -> list:
    """The network as sort.py builds it, in Python: a partner at or past n keeps the
    element; (key, original position) pairs order the ties."""
    n, values = len(keys), [(k, i) for i, k in enumerate(keys)]
    for mask in network_masks(n):
        step = list(values)
        for i in range(n):
            partner = i ^ mask
            if partner >= n:
                continue
            low, high = min(i, partner), max(i, partner)
            if values[high] < values[low]:
                step[i] = values[partner]
        values = step
    return values


@pytest.mark.parametrize("n", [2, 3, 5, 6, 7, 9, 17, 31, 33, 100])
def test_network_without_padding_sorts_every_length(n, rng):
    for _ in range(20):
        keys = rng.integers(0, 4, n).tolist()
        assert _network_reference(keys) == sorted((k, i) for i, k in enumerate(keys))


@pytest.mark.parametrize("n", [1, 2, 3, 7, 33, 100, 257])
def test_sort_odd_lengths_nans_and_signed_zeros(n, rng):
    x = rng.standard_normal(n).astype(np.float32)
    x[rng.integers(0, n, max(1, n // 5))] = 0.0
    if n > 2:
        x[1], x[n - 1] = -0.0, np.nan
        x[n // 2] = -np.nan
        x[0] = -np.inf
    exe = check_exact(jnp.sort, x)
    if n > 1:
        assert len(launches(exe)) >= len(network_masks(n))


def test_argsort_is_stable_under_ties(rng):
    x = rng.integers(0, 5, (4, 75)).astype(np.int32)
    exe, (got,) = emulate(lambda x: jnp.argsort(x, axis=1, stable=True), x)
    np.testing.assert_array_equal(got, np.argsort(x, axis=1, kind="stable"))
    # float ties: -0.0 and +0.0 are equal to jnp.sort's comparator, so they keep their order
    y = np.array([0.0, -0.0, 1.0, -0.0, 0.0, np.nan, -1.0, np.nan], np.float32)
    check_exact(lambda y: jnp.argsort(y, stable=True), y)
    check_exact(jnp.sort, y)


def test_descending_and_unstable_sorts(rng):
    x = rng.integers(-3, 3, (6, 41)).astype(np.int32)
    check_exact(lambda x: jnp.sort(x, axis=1, descending=True), x)
    check_exact(lambda x: jnp.argsort(x, axis=1, descending=True, stable=True), x)
    check_exact(lambda x: jax.lax.sort(x, dimension=1, is_stable=False), x)


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_batched_sort_along_any_dimension(axis, rng):
    x = rng.standard_normal((5, 6, 13)).astype(np.float32)
    check_exact(lambda x: (jnp.sort(x, axis=axis), jnp.argsort(x, axis=axis)), x)


def test_several_operands_and_keys(rng):
    keys = rng.integers(0, 3, 50).astype(np.int32)
    second = rng.integers(0, 4, 50).astype(np.float32)
    payload = rng.standard_normal(50).astype(np.float32)
    check_exact(lambda k, s, p: jax.lax.sort((k, s, p), num_keys=1), keys, second, payload)
    check_exact(lambda k, s, p: jax.lax.sort((k, s, p), num_keys=2), keys, second, payload)


@pytest.mark.parametrize("dtype", [np.int8, np.uint32, np.float16, ml_dtypes.bfloat16,
                                   np.int64, np.float64])
def test_sort_dtypes(dtype, rng, jax_x64):
    x = (rng.standard_normal((3, 21)) * 40).astype(dtype)
    check_exact(lambda x: (jnp.sort(x, axis=-1), jnp.argsort(x, axis=-1)), x)


def test_top_k_values_and_indices(rng):
    x = rng.standard_normal((7, 90)).astype(np.float32)
    x[2, 10:20] = 1.5   # ties: the lower index first
    x[3, 5] = np.nan
    exe = check_exact(lambda x: jax.lax.top_k(x, 5), x)
    assert len(launches(exe)) >= len(network_masks(90))


CUSTOM_COMPARATOR = """
func.func @main(%x: tensor<4x9xf32>, %i: tensor<4x9xi32>) -> (tensor<4x9xf32>, tensor<4x9xi32>) {
  %0:2 = "stablehlo.sort"(%x, %i) <{dimension = 1 : i64, is_stable = false}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>, %p: tensor<i32>, %q: tensor<i32>):
    %ma = stablehlo.abs %a : tensor<f32>
    %mb = stablehlo.abs %b : tensor<f32>
    %c = stablehlo.compare GT, %ma, %mb, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  }) : (tensor<4x9xf32>, tensor<4x9xi32>) -> (tensor<4x9xf32>, tensor<4x9xi32>)
  return %0#0, %0#1 : tensor<4x9xf32>, tensor<4x9xi32>
}
"""


def test_custom_comparator_region(rng):
    # descending by magnitude; equal magnitudes (x and -x) keep their original order
    x = rng.integers(-4, 5, (4, 9)).astype(np.float32)
    i = np.tile(np.arange(9, dtype=np.int32), (4, 1))
    got_x, got_i = kiln.compile(CUSTOM_COMPARATOR, target="gpu-emulator")(x, i)
    order = np.argsort(-np.abs(x), axis=1, kind="stable")
    np.testing.assert_array_equal(got_x, np.take_along_axis(x, order, 1))
    np.testing.assert_array_equal(got_i, order)


def test_sort_of_one_element_rows_is_a_copy(rng):
    x = rng.standard_normal((5, 1)).astype(np.float32)
    check_exact(lambda x: jnp.sort(x, axis=1), x)


def test_sort_steps_are_parallel_kernels():
    exe = kiln.compile(jax_program(lambda x: jnp.sort(x, axis=1),
                                   np.zeros((3, 100), np.float32)), target="gpu")
    kernels = exe.ir("gpu-map")
    assert "scf.for" not in kernels  # no thread loops over the row: one element a thread
    assert len(launches(exe)) == len(network_masks(100))
    assert all("block=(256,1,1)" in name for name in launches(exe))


# -- scatter -------------------------------------------------------------------------------

def _indices(rng, size, count, *, bounds=True):
    idx = rng.integers(0, size, count).astype(np.int32)
    if bounds:
        idx[0], idx[-1] = -1, size + 3   # skipped: outside the operand
        if count > 3:
            idx[1] = idx[2]              # a duplicate
    return idx


@pytest.mark.parametrize("combine", ["add", "max", "min"])
def test_scatter_float_atomics(combine, rng):
    x = rng.standard_normal((20, 6)).astype(np.float32)
    idx = _indices(rng, 20, 40)
    u = rng.standard_normal((40, 6)).astype(np.float32)
    u[3, 2] = np.nan     # max and min propagate NaN, as stablehlo.maximum does
    f = lambda x, i, u: getattr(x.at[i], combine)(u, mode="drop")
    exe, (got,) = emulate(f, x, idx, u)
    np.testing.assert_allclose(got, np.asarray(f(jnp.asarray(x), idx, u)), rtol=1e-5,
                               atol=1e-5)
    gpu_ir = kiln.compile(jax_program(f, x, idx, u), target="gpu").ir("gpu-map")
    assert ("memref.atomic_rmw addf" if combine == "add" else "memref.generic_atomic_rmw") \
        in gpu_ir


@pytest.mark.parametrize("dtype", [np.int32, np.uint32, np.int64, np.uint64])
def test_scatter_integer_atomics(dtype, rng, jax_x64):
    x = rng.integers(-100, 100, (9, 4)).astype(dtype)
    idx = _indices(rng, 9, 30)
    u = rng.integers(-100, 100, (30, 4)).astype(dtype)
    exe = check_exact(lambda x, i, u: (x.at[i].add(u, mode="drop"), x.at[i].max(u, mode="drop"),
                                       x.at[i].min(u, mode="drop")), x, idx, u)
    signed = np.issubdtype(dtype, np.signedinteger)
    kinds = ["addi", "maxs", "mins"] if signed else ["addi", "maxu", "minu"]
    assert all(f"memref.atomic_rmw {k}" in exe.ir("gpu-map") for k in kinds)


OR_SCATTER = """
func.func @main(%x: tensor<8xi32>, %i: tensor<5x1xi32>, %u: tensor<5xi32>) -> tensor<8xi32> {
  %0 = "stablehlo.scatter"(%x, %i, %u) <{scatter_dimension_numbers = #stablehlo.scatter<
      inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>}> ({
  ^bb0(%a: tensor<i32>, %b: tensor<i32>):
    %r = stablehlo.OP %b, %a : tensor<i32>
    stablehlo.return %r : tensor<i32>
  }) : (tensor<8xi32>, tensor<5x1xi32>, tensor<5xi32>) -> tensor<8xi32>
  return %0 : tensor<8xi32>
}
"""


@pytest.mark.parametrize("op", ["or", "and"])
def test_scatter_bitwise_atomics(op):
    x = np.array([1, 2, 4, 8, 16, 32, 64, -1], np.int32)
    idx = np.array([[0], [0], [3], [9], [7]], np.int32)
    u = np.array([6, 3, 12, 1, 5], np.int32)
    want = x.copy()
    for (i,), v in zip(idx, u):
        if 0 <= i < 8:
            want[i] = (want[i] | v) if op == "or" else (want[i] & v)
    program = OR_SCATTER.replace("OP", op)
    exe = kiln.compile(program, target="gpu-emulator")
    np.testing.assert_array_equal(as_tuple(exe(x, idx, u))[0], want)
    assert f"memref.atomic_rmw {op}i" in exe.ir("gpu-map")


def test_scatter_windows_and_two_dimensional_indices(rng):
    x = rng.standard_normal((7, 8, 5)).astype(np.float32)
    idx = np.array([[0, 1], [6, 7], [3, 3], [3, 3], [7, 0], [-1, 2], [2, 5]], np.int32)
    u = rng.standard_normal((7, 5)).astype(np.float32)
    f = lambda x, i, u: x.at[i[:, 0], i[:, 1]].add(u, mode="drop")
    exe, (got,) = emulate(f, x, idx, u)
    np.testing.assert_allclose(got, np.asarray(f(jnp.asarray(x), idx, u)), rtol=1e-5)
    # a window of rows: whole windows out of bounds are skipped
    rows = np.array([[0], [5], [9], [-2], [2]], np.int32)
    blocks = rng.standard_normal((5, 3, 8, 5)).astype(np.float32)
    dnums = jax.lax.ScatterDimensionNumbers(update_window_dims=(1, 2, 3),
                                            inserted_window_dims=(),
                                            scatter_dims_to_operand_dims=(0,))
    g = lambda x, i, u: jax.lax.scatter_add(x, i, u, dnums, mode="drop")
    exe, (got,) = emulate(g, x, rows, blocks)
    want = x.copy()
    for (r,), b in zip(rows, blocks):
        if 0 <= r <= 7 - 3:
            want[r:r + 3] += b
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_scatter_replace_and_unique_indices(rng):
    x = rng.standard_normal((30, 3)).astype(np.float32)
    idx = rng.permutation(30)[:12].astype(np.int32)
    u = rng.standard_normal((12, 3)).astype(np.float32)
    check_exact(lambda x, i, u: x.at[i].set(u), x, idx, u)
    check_exact(lambda x, i, u: x.at[i].multiply(u, unique_indices=True), x, idx, u)
    check_exact(lambda x, i, u: x.at[i].divide(u, unique_indices=True), x, idx, u)
    small = rng.integers(0, 100, 30).astype(np.int8)
    check_exact(lambda x, i, u: x.at[i].set(u), small, idx, u[:, 0].astype(np.int8))
    # duplicates under a replacing combiner: each element ends up one of its updates
    dup = np.array([4, 4, 4, 1], np.int32)
    vals = np.array([10.0, 20.0, 30.0, 5.0], np.float32)
    (got,) = emulate(lambda x, i, u: x.at[i].set(u), x[:, 0], dup, vals)[1]
    assert got[4] in (10.0, 20.0, 30.0) and got[1] == 5.0
    np.testing.assert_array_equal(np.delete(got, [1, 4]), np.delete(x[:, 0], [1, 4]))


TWO_OPERANDS_UNIQUE = """
func.func @main(%x: tensor<6xf32>, %y: tensor<6xi32>, %i: tensor<3x1xi32>, %u: tensor<3xf32>,
                %v: tensor<3xi32>) -> (tensor<6xf32>, tensor<6xi32>) {
  %0:2 = "stablehlo.scatter"(%x, %y, %i, %u, %v) <{scatter_dimension_numbers =
      #stablehlo.scatter<inserted_window_dims = [0], scatter_dims_to_operand_dims = [0],
      index_vector_dim = 1>, unique_indices = true}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<i32>, %c: tensor<f32>, %d: tensor<i32>):
    %s = stablehlo.subtract %a, %c : tensor<f32>
    %m = stablehlo.multiply %b, %d : tensor<i32>
    stablehlo.return %s, %m : tensor<f32>, tensor<i32>
  }) : (tensor<6xf32>, tensor<6xi32>, tensor<3x1xi32>, tensor<3xf32>, tensor<3xi32>)
     -> (tensor<6xf32>, tensor<6xi32>)
  return %0#0, %0#1 : tensor<6xf32>, tensor<6xi32>
}
"""


def test_two_operand_scatter_with_unique_indices():
    x = np.arange(6, dtype=np.float32)
    y = np.arange(1, 7, dtype=np.int32)
    idx = np.array([[4], [0], [7]], np.int32)   # the last one outside: skipped
    u = np.array([0.5, 2.0, 9.0], np.float32)
    v = np.array([3, -2, 5], np.int32)
    exe = kiln.compile(TWO_OPERANDS_UNIQUE, target="gpu-emulator")
    got_x, got_y = exe(x, y, idx, u, v)
    np.testing.assert_array_equal(got_x, [-2.0, 1, 2, 3, 3.5, 5])
    np.testing.assert_array_equal(got_y, [-2, 2, 3, 4, 15, 6])
    assert "scf.for" not in exe.ir("gpu-map")   # a thread per update, no serial loop


def test_serial_scatters_stay_correct(rng):
    # multiply with duplicate indices, and a scatter of two operands: applied in order
    x = rng.standard_normal((10, 4)).astype(np.float32)
    idx = np.array([1, 1, 3, 12, 1], np.int32)
    u = rng.standard_normal((5, 4)).astype(np.float32)
    f = lambda x, i, u: x.at[i].multiply(u, mode="drop")
    exe, (got,) = emulate(f, x, idx, u)
    np.testing.assert_allclose(got, np.asarray(f(jnp.asarray(x), idx, u)), rtol=1e-6)
    assert "atomic" not in exe.ir("gpu-map")


def test_batched_scatter_and_inputs_unchanged(rng):
    x = rng.standard_normal((4, 12)).astype(np.float32)
    idx = rng.integers(-2, 14, (4, 9)).astype(np.int32)
    u = rng.standard_normal((4, 9)).astype(np.float32)
    f = jax.vmap(lambda x, i, u: x.at[i].add(u, mode="drop"))
    kept = x.copy()
    exe, (got,) = emulate(f, x, idx, u)
    np.testing.assert_allclose(got, np.asarray(f(jnp.asarray(x), idx, u)), rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_array_equal(x, kept)
    np.testing.assert_allclose(exe(x, idx, u), got)


def test_sort_and_scatter_in_a_loop_body(rng):
    x = rng.standard_normal((4, 37)).astype(np.float32)
    idx = rng.integers(-2, 40, 20).astype(np.int32)

    def f(x, i):
        def body(k, c):
            c = jnp.sort(c * -1.0, axis=1)
            return c.at[:, i].add(1.0, mode="drop")
        return jax.lax.fori_loop(0, 3, body, x)
    exe, (got,) = emulate(f, x, idx)
    np.testing.assert_allclose(got, np.asarray(f(jnp.asarray(x), idx)), rtol=1e-6)


# -- PTX -------------------------------------------------------------------------------------

PTX_PROGRAMS = {
    "sort": (lambda x: (jnp.sort(x, axis=1), jnp.argsort(x, axis=0)),
             [np.zeros((16, 100), np.float32)]),
    "top_k": (lambda x: jax.lax.top_k(x, 8), [np.zeros((8, 300), np.float32)]),
    "scatter": (lambda x, i, u, v: (x.at[i].add(u, mode="drop"), x.at[i].max(u, mode="drop"),
                                    v.at[i].min(u.astype(np.int32), mode="drop"),
                                    x.at[i].set(u, unique_indices=True)),
                [np.zeros((50, 8), np.float32), np.zeros(20, np.int32),
                 np.zeros((20, 8), np.float32), np.zeros((50, 8), np.int32)]),
}


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("name", sorted(PTX_PROGRAMS))
def test_ptx_assembles_within_limits(name, arch):
    f, args = PTX_PROGRAMS[name]
    exe = kiln.compile(jax_program(f, *args), target="gpu", gpu_arch=arch)
    bundle = json.loads(next(iter(exe._cache.values())).artifact.code)
    assert f".target {arch}" in bundle["ptx"]
    assert base64.b64decode(bundle["cubin"])[:4] == b"\x7fELF"
    if name == "scatter":
        # float add and integer min as atomics; float max as a compare-and-swap loop
        atomics = set(re.findall(r"atom\.[\w.]+", bundle["ptx"]))
        assert {"atom.global.add.f32", "atom.global.min.s32"} <= atomics, atomics
        assert any(a.endswith("cas.b32") for a in atomics), atomics
    for r in bundle["resources"]:
        assert 0 < r["registers"] <= MAX_REGISTERS, r
        assert r["spill_stores"] == 0 and r["spill_loads"] == 0, r
        assert r["shared_bytes"] <= MAX_STATIC_SHARED, r
