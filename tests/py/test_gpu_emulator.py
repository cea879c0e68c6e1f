"""The GPU target's programs run by the GPU emulator (target="gpu-emulator"): the same plan
and the same kernels' LLVM IR the NVPTX back end receives, executed on the CPU. Results
are compared with numpy and JAX; what the target cannot run must be a located KilnError."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax import export

import kiln
from kiln.errors import KilnError


def jax_program(f, *args) -> bytes:
    specs = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in args]
    return export.export(jax.jit(f))(*specs).serialize()


def emulate(f, *args):
    exe = kiln.compile(jax_program(f, *args), target="gpu-emulator")
    got = exe(*args)
    return exe, (got if isinstance(got, tuple) else (got,))


def check(f, *args, rtol=1e-5, atol=1e-5):
    exe, got = emulate(f, *args)
    want = f(*args)
    want = want if isinstance(want, (tuple, list)) else (want,)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        w = np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, g.dtype, w.shape, w.dtype)
        np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=rtol, atol=atol)
    return exe


@pytest.fixture
def rng():
    return np.random.default_rng(16)


def test_elementwise_chain_and_broadcast(rng):
    x = rng.standard_normal((33, 70), np.float32)
    b = rng.standard_normal(70, np.float32)
    exe = check(lambda x, b: jnp.tanh(x * b[None, :] + 1.0) - jnp.exp(-x), x, b)
    # one fusion: one kernel, the contiguous dimension (70) on threadIdx.x
    launches = [t for t in exe.thunks() if t.kind == "kernel-launch"]
    assert len(launches) == 1 and "grid=(1,33,1) block=(256,1,1)" in launches[0].name


def test_row_and_column_reductions(rng):
    x = rng.standard_normal((50, 77), np.float32)
    check(lambda x: (x.sum(1), x.max(0), jnp.mean(x, axis=1)), x, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("shape", [(30,), (300, 70)])
def test_full_reductions(rng, shape):
    # (30,): one serial kernel; 21000 elements: 1024 per-thread partials, then a second kernel
    x = rng.standard_normal(shape, np.float32)
    exe = check(lambda x: (x.sum(), x.max(), x.min()), x, rtol=1e-4, atol=1e-3)
    names = " ".join(t.name for t in exe.thunks())
    if len(shape) == 2:
        assert "grid=(4,1,1)" in names  # the partials' kernel: 1024 threads


def test_transpose_matmul_and_softmax(rng):
    a = rng.standard_normal((32, 48), np.float32)
    b = rng.standard_normal((48, 20), np.float32)
    check(lambda a, b: (a.T + 1.0, a @ b, jax.nn.softmax(a, axis=-1)), a, b, rtol=1e-4, atol=1e-4)


def test_jax_mlp_and_layer_norm(rng):
    x = rng.standard_normal((4, 16), np.float32)
    w = rng.standard_normal((16, 8), np.float32)
    bias = rng.standard_normal(8, np.float32)

    def mlp(x, w, bias):
        h = jax.nn.relu(x @ w + bias)
        mu = h.mean(-1, keepdims=True)
        return (h - mu) / jnp.sqrt(((h - mu) ** 2).mean(-1, keepdims=True) + 1e-5)
    check(mlp, x, w, bias, rtol=1e-4, atol=1e-4)


def test_data_movement(rng):
    x = rng.standard_normal((10, 5), np.float32)
    check(lambda x, y: (jnp.concatenate([x, y], 0)[::2], jnp.where(x > 0, x, 0.1 * y),
                        x + jnp.arange(5, dtype=jnp.float32), jnp.argmax(x, axis=1),
                        jnp.sort(x[0]), jnp.cumsum(x[:, 0]), x[3, 4] * 2), x, x * 2)


def test_dynamic_slices_and_updates(rng):
    x = rng.standard_normal((12, 6), np.float32)
    i = np.array(5, np.int32)  # the offsets are program values, read in the kernels
    check(lambda x, i: (jax.lax.dynamic_slice(x, (i, i - 4), (4, 3)),
                        jax.lax.dynamic_update_slice(x, jnp.ones((2, 6), x.dtype) * 7, (i, 0)),
                        jax.lax.dynamic_slice(x, (i * 9, 0), (2, 6))),  # clamped like XLA
          x, i)


def test_inputs_are_left_unchanged(rng):
    # the scatter updates its operand's buffer in place: on the device copy, never the caller's
    x = rng.standard_normal((3, 4), np.float32)
    before = x.copy()
    check(lambda x, y: jnp.asarray(x).at[1].multiply(y), x, np.float32(3.0))
    np.testing.assert_array_equal(x, before)


def test_accurate_libm_functions(rng):
    x = np.abs(rng.standard_normal(40, np.float32)) * 1e-3
    check(lambda x: (jnp.log1p(x), jnp.expm1(x), jax.lax.rsqrt(x + 1), jnp.power(x, 1.5)),
          x, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, ml_dtypes.bfloat16,
                                   np.int32, np.int8, np.int64, np.uint32, np.bool_])
def test_dtypes(dtype, jax_x64):
    x = (np.arange(24).reshape(4, 6) % 7 - 3).astype(dtype)
    if dtype == np.bool_:
        check(lambda x: (jnp.logical_not(x), x.any(1)), x)
    elif np.issubdtype(dtype, np.integer):
        check(lambda x: (x * 3 + 1, x.max(1), x.sum(0)), x)
    else:
        tol = 1e-2 if np.dtype(dtype).itemsize == 2 else 1e-6
        check(lambda x: (jnp.exp(x / 4) * x, x.sum(1)), x, rtol=tol, atol=tol)


def test_complex(rng):
    x = (rng.standard_normal(8) + 1j * rng.standard_normal(8)).astype(np.complex64)
    _, (got,) = emulate(lambda x: x * x + 1, x)
    np.testing.assert_allclose(got, x * x + 1, rtol=1e-6)


def test_host_control_flow_is_a_located_error(rng):
    x = rng.standard_normal(16, np.float32)
    with pytest.raises(KilnError) as info:
        emulate(lambda x: jax.lax.while_loop(lambda v: v.sum() < 100, lambda v: v * 2 + 1, x), x)
    error = info.value
    assert "scf.while" in error.message and error.location and error.hint
    assert "test_gpu_emulator.py" in error.location


def test_thunks_and_buffer_assignment(rng):
    x = rng.standard_normal((64, 100), np.float32)
    exe = check(lambda x: (jnp.tanh(x), jnp.tanh(x).sum()), x, rtol=1e-4, atol=1e-3)
    thunks = exe.thunks()
    assert all(t.kind == "kernel-launch" for t in thunks)
    text = str(thunks)
    assert "grid=(1,64,1) block=(256,1,1)" in text
    assert "reads: [{0, 0, 25600}]" in text  # the argument, read by the tanh kernel
    assignment = exe.buffer_assignment()
    kinds = sorted(b.kind for b in assignment.buffers)
    assert kinds.count("parameter") == 1 and kinds.count("output") == 2
    assert "temp" in kinds  # the partial sums


def test_saved_emulator_executable_runs(tmp_path, rng):
    x = rng.standard_normal((8, 8), np.float32)
    exe = kiln.compile(jax_program(lambda x: jnp.sin(x) @ x, x), target="gpu-emulator")
    exe.save(tmp_path / "prog.kx")
    loaded = kiln.load_executable(tmp_path / "prog.kx")
    np.testing.assert_allclose(loaded(x), np.sin(x) @ x, rtol=1e-5, atol=1e-5)


def test_kernels_with_barriers_are_refused_by_name():
    from kiln.runtime.gpu_emulator import retarget
    llvm_ir = """define ptx_kernel void @k(ptr %p) {
  call void @llvm.nvvm.barrier0()
  ret void
}
declare void @llvm.nvvm.barrier0()
"""
    with pytest.raises(KilnError) as info:
        retarget(llvm_ir, ["k"])
    assert "llvm.nvvm.barrier0" in info.value.message and "fibers" in info.value.hint
