"""The GPU kernels that stage data in shared memory (lowering/gpu/columns.py, transposes.py,
products.py): run by the GPU emulator (target="gpu-emulator", barriers and shared memory as
on the device, shared memory poisoned before each block) against numpy over sizes that are
not multiples of the tiles, lone elements and large arrays; and their PTX assembled by
ptxas for sm_80 and sm_90 within the hardware's limits."""
from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax import export

import kiln

MAX_REGISTERS = 255
MAX_STATIC_SHARED = 48 * 1024


def jax_program(f, *args) -> bytes:
    specs = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in args]
    return export.export(jax.jit(f))(*specs).serialize()


def launches(exe) -> list[str]:
    return [t.name for t in exe.thunks() if t.kind == "kernel-launch"]


def check(f, want, *args, rtol=1e-5, atol=1e-5):
    """f's results in the emulator against numpy's `want` (a tuple); the executable."""
    exe = kiln.compile(jax_program(f, *args), target="gpu-emulator")
    got = exe(*args)
    got = got if isinstance(got, tuple) else (got,)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        w = np.asarray(w)
        assert g.shape == w.shape, (g.shape, w.shape)
        np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64),
                                   rtol=rtol, atol=atol)
    return exe


@pytest.fixture
def rng():
    return np.random.default_rng(16)


# -- column reductions ------------------------------------------------------------------------

@pytest.mark.parametrize("shape, kernels", [
    # long columns, too few blocks for a GPU: 8 slices of 512 rows (grid.z) on 32 rows of
    # threads, then the 8 partials of each column
    ((4096, 1000), ["grid=(32,1,8) block=(32,32,1)", "grid=(32,1,1) block=(32,8,1)"]),
    ((50, 77), ["grid=(3,1,1) block=(32,8,1)"]),    # 77 columns: a partial tile of 13
    ((33, 1), []),                      # one column (a row reduction after canonicalizing)
    # the middle axis of three: grid.y over the first; 1000 rows in slices of 336, 336, 328
    ((40, 1000, 3), ["grid=(1,40,3) block=(32,8,1)", "grid=(1,40,1) block=(32,2,1)"]),
])
def test_column_reductions(rng, shape, kernels):
    x = rng.standard_normal(shape, np.float32)
    axis = 1 if len(shape) == 3 else 0
    exe = check(lambda x: (jnp.sum(x, axis), jnp.max(x, axis)),
                (x.astype(np.float64).sum(axis), x.max(axis)), x, rtol=1e-4, atol=1e-3)
    names = launches(exe)
    for kernel in kernels:   # once for the sum, once for the max
        assert sum(kernel in name for name in names) == 2, names
    if not kernels:
        assert not any("block=(32," in name for name in names), names


def test_column_reductions_of_integers_and_several_axes(rng):
    x = rng.integers(-1000, 1000, (300, 45)).astype(np.int32)
    exe = check(lambda x: (jnp.sum(x, 0), jnp.min(x, 0)), (x.sum(0), x.min(0)), x)
    assert sum("block=(32,8,1)" in name for name in launches(exe)) == 2
    y = rng.standard_normal((64, 50, 30), np.float32)
    exe = check(lambda y: jnp.sum(y, (0, 1)), (y.astype(np.float64).sum((0, 1)),), y,
                rtol=1e-4, atol=1e-3)
    # 3200 rows of 30 columns: 12 slices of 288 (the last of 32), then 12 partials a column
    names = launches(exe)
    assert any("grid=(1,1,12) block=(32,32,1)" in name for name in names), names
    assert any("grid=(1,1,1) block=(32,8,1)" in name for name in names), names


def test_short_columns_keep_one_thread_per_output(rng):
    x = rng.standard_normal((7, 5, 300), np.float32)
    exe = check(lambda x: jnp.sum(x, 0), (x.sum(0),), x, rtol=1e-5, atol=1e-5)
    assert all("block=(256,1,1)" in name for name in launches(exe))


# -- transposes ---------------------------------------------------------------------------------

@pytest.mark.parametrize("shape, f, want, grid", [
    ((100, 70), lambda x: x.T, lambda x: x.T, "grid=(4,3,1)"),
    ((1000, 513), lambda x: x.T * 2.0 + 1.0, lambda x: x.T * 2.0 + 1.0, "grid=(32,17,1)"),
    ((3, 40, 33), lambda x: jnp.swapaxes(x, 1, 2), lambda x: np.swapaxes(x, 1, 2),
     "grid=(2,2,3)"),
    ((17, 40, 33), lambda x: jnp.transpose(x, (2, 0, 1)), lambda x: np.transpose(x, (2, 0, 1)),
     "grid=(2,2,17)"),
    ((1, 5), lambda x: x.T, lambda x: x.T, None),   # too thin for a tile: plain loops
])
def test_transposes(rng, shape, f, want, grid):
    x = rng.standard_normal(shape, np.float32)
    exe = check(f, (want(x),), x)
    names = launches(exe)
    if grid:
        assert any(f"{grid} block=(32,8,1)" in name for name in names), names
    else:
        assert not any("block=(32,8,1)" in name for name in names), names


def test_transpose_with_a_coalesced_input_and_half_precision(rng):
    a = rng.standard_normal((64, 48), np.float32)
    b = rng.standard_normal((48, 64), np.float32)
    exe = check(lambda a, b: a + b.T, (a + b.T,), a, b)
    assert launches(exe) == ["main_kernel grid=(2,2,1) block=(32,8,1)"]
    h = rng.standard_normal((64, 48)).astype(np.float16)
    check(lambda h: h.T, (h.T,), h, rtol=0, atol=0)


# -- tiled matrix products --------------------------------------------------------------------

def _f(*shape, dtype=np.float32, rng=np.random.default_rng(7)):
    return rng.standard_normal(shape).astype(dtype)


def _tiled(exe) -> list[str]:
    return [name for name in launches(exe) if "block=(16,16,1)" in name]


@pytest.mark.parametrize("m, k, n, grid", [
    (100, 70, 50, "grid=(1,2,1)"),      # no side a multiple of a tile, K = 4 x 16 + 6
    (128, 64, 64, "grid=(1,2,1)"),      # exact tiles, no leftover K step
    (40, 9, 33, "grid=(1,1,1)"),        # K shorter than one step
    (300, 257, 129, "grid=(3,5,1)"),    # larger, K = 16 x 16 + 1
])
def test_matmul(m, k, n, grid):
    a, b = _f(m, k), _f(k, n)
    exe = check(lambda a, b: a @ b, (a.astype(np.float64) @ b,), a, b, rtol=1e-4, atol=1e-4)
    assert [grid in name for name in _tiled(exe)] == [True]


def test_gram_matrices_read_one_buffer_twice():
    x = _f(70, 40)
    exe = check(lambda x: (x.T @ x, x @ x.T), (x.T.astype(np.float64) @ x,
                                                x.astype(np.float64) @ x.T), x,
                rtol=1e-4, atol=1e-4)
    assert len(_tiled(exe)) == 2


def test_matmul_with_one_row_stays_a_loop():
    a, b = _f(1, 70), _f(70, 50)
    exe = check(lambda a, b: a @ b, (a.astype(np.float64) @ b,), a, b, rtol=1e-4, atol=1e-4)
    assert not _tiled(exe)


def test_batch_matmul_with_transposed_operands():
    a, b = _f(3, 100, 70), _f(3, 50, 70)
    want = np.einsum("bij,bkj->bik", a.astype(np.float64), b)
    exe = check(lambda a, b: jnp.einsum("bij,bkj->bik", a, b), (want,), a, b,
                rtol=1e-4, atol=1e-4)
    assert ["grid=(1,2,3)" in name for name in _tiled(exe)] == [True]
    c = _f(70, 100)
    d = _f(70, 50)
    exe = check(lambda c, d: c.T @ d, (c.T.astype(np.float64) @ d,), c, d, rtol=1e-4,
                atol=1e-4)
    assert len(_tiled(exe)) == 1


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
def test_half_precision_inputs_accumulate_in_f32(dtype):
    a, b = _f(100, 70, dtype=dtype), _f(70, 50, dtype=dtype)
    want = a.astype(np.float64) @ b.astype(np.float64)
    exe = check(lambda a, b: jnp.matmul(a, b, preferred_element_type=jnp.float32), (want,),
                a, b, rtol=1e-4, atol=1e-4)
    assert len(_tiled(exe)) == 1


def test_integer_matmul(rng):
    a = rng.integers(-9, 9, (50, 30)).astype(np.int32)
    b = rng.integers(-9, 9, (30, 40)).astype(np.int32)
    exe = check(lambda a, b: a @ b, (a @ b,), a, b, rtol=0, atol=0)
    assert len(_tiled(exe)) == 1


def _conv_nhwc(x, w, stride):
    """numpy's VALID NHWC x HWIO convolution."""
    kh, kw = w.shape[:2]
    oh = (x.shape[1] - kh) // stride + 1
    ow = (x.shape[2] - kw) // stride + 1
    out = np.zeros((x.shape[0], oh, ow, w.shape[3]))
    for i in range(kh):
        for j in range(kw):
            patch = x[:, i:i + stride * oh:stride, j:j + stride * ow:stride, :]
            out += np.einsum("nhwc,cf->nhwf", patch.astype(np.float64), w[i, j])
    return out


def test_strided_convolution_is_an_implicit_gemm():
    x, w = _f(2, 17, 17, 20), _f(3, 3, 20, 24)
    exe = check(lambda x, w: jax.lax.conv_general_dilated(
        x, w, (2, 2), "VALID", dimension_numbers=("NHWC", "HWIO", "NHWC")),
        (_conv_nhwc(x, w, 2),), x, w, rtol=1e-4, atol=1e-4)
    assert ["grid=(1,2,1)" in name for name in _tiled(exe)] == [True]


def test_grouped_and_depthwise_convolutions():
    # two groups of 16 -> 32 features: each group's convolution a tiled kernel; depthwise
    # (a multiplier of 2: N too narrow for a tile) stays with the loops, correct either way
    x = _f(2, 20, 20, 32)
    for w, groups, tiled in ((_f(3, 3, 16, 32), 2, 2), (_f(3, 3, 1, 64), 32, 0)):
        def conv(x, w, groups=groups):
            return jax.lax.conv_general_dilated(x, w, (1, 1), "VALID", dimension_numbers=(
                "NHWC", "HWIO", "NHWC"), feature_group_count=groups)
        per_group = w.shape[3] // groups
        want = np.concatenate([_conv_nhwc(x[..., g * w.shape[2]:(g + 1) * w.shape[2]],
                                          w[..., g * per_group:(g + 1) * per_group], 1)
                               for g in range(groups)], axis=-1)
        exe = check(conv, (want,), x, w, rtol=1e-4, atol=1e-4)
        assert len(_tiled(exe)) == tiled, launches(exe)


# -- ptxas ------------------------------------------------------------------------------------

PROGRAMS = {
    # name: (function, argument shapes, dtype, kernels using shared memory)
    "columns": (lambda x: (x.sum(0), x.max(0)), [(4096, 1000)], np.float32, 4),
    "transposes": (lambda x: (x.T * 2.0, jnp.transpose(x.reshape(10, 100, 40), (0, 2, 1))),
                   [(1000, 40)], np.float32, 2),
    "matmul": (lambda a, b: a @ b, [(300, 257), (257, 129)], np.float32, 1),
    "conv": (lambda x, w: jax.lax.conv_general_dilated(
        x, w, (2, 2), "VALID", dimension_numbers=("NHWC", "HWIO", "NHWC")),
        [(2, 17, 17, 20), (3, 3, 20, 24)], np.float32, 1),
    "bf16": (lambda a, b: jnp.matmul(a, b, preferred_element_type=jnp.float32),
             [(100, 70), (70, 50)], ml_dtypes.bfloat16, 1),
}


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_ptx_assembles_within_limits(name, arch):
    f, shapes, dtype, staged = PROGRAMS[name]
    specs = [jax.ShapeDtypeStruct(s, dtype) for s in shapes]
    program = export.export(jax.jit(f))(*specs).serialize()
    exe = kiln.compile(program, target="gpu", gpu_arch=arch)
    bundle = json.loads(next(iter(exe._cache.values())).artifact.code)
    text = bundle["ptx"]
    assert f".target {arch}" in text
    assert "bar.sync" in text and "st.shared" in text and "ld.shared" in text
    resources = bundle["resources"]
    assert {r["name"] for r in resources} == set(bundle["kernels"])
    for r in resources:
        assert 0 < r["registers"] <= MAX_REGISTERS, r
        assert r["spill_stores"] == 0 and r["spill_loads"] == 0 and r["stack_bytes"] == 0, r
        assert r["shared_bytes"] <= MAX_STATIC_SHARED, r
    assert sum(r["shared_bytes"] > 0 for r in resources) == staged
    if name in ("matmul", "conv"):
        # the rank-1 updates contract to FMAs
        assert "fma.rn.f32" in text
