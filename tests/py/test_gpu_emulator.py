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
    # (30,): one block; 21000 elements: 1024 partials of 20 (32 lanes each, 8 to a block),
    # then a block combining them
    x = rng.standard_normal(shape, np.float32)
    exe = check(lambda x: (x.sum(), x.max(), x.min()), x, rtol=1e-4, atol=1e-3)
    names = " ".join(t.name for t in exe.thunks())
    if len(shape) == 2:
        assert "grid=(128,1,1) block=(256,1,1)" in names  # the partials' kernel


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


def test_host_control_flow_runs(rng):
    # a while on a predicate the device computes: the plan's while step (more in
    # test_gpu_plan_control_flow.py)
    x = rng.standard_normal(16, np.float32)
    check(lambda x: jax.lax.while_loop(lambda v: v.sum() < 100, lambda v: v * 2 + 1, x), x)


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


# -- block reductions: warp shuffles and shared memory, run by the emulator's fibers --------

@pytest.mark.parametrize("shape", [(1, 1), (3, 1), (300, 1), (5, 31), (100, 3), (700, 8), (20, 32),
                                   (7, 33), (50, 77), (2, 256), (2, 257), (3, 5000),
                                   (1, 100_003)])
def test_block_row_reductions_over_odd_sizes(rng, shape):
    x = rng.standard_normal(shape, np.float32)
    exe = check(lambda x: (x.sum(1), x.max(1), x.min(1), jnp.exp(x).sum(1),
                           (x * x).sum(1) + 1.0), x, rtol=1e-4, atol=1e-4)
    names = " ".join(t.name for t in exe.thunks())
    rows, length = shape
    if length > 32 or rows == 1:
        # one block per row: a warp's multiple at least the row, 256 threads at most
        threads = min(256, -(-length // 32) * 32)
        assert f"grid=({rows},1,1) block=({threads},1,1)" in names
    else:
        # a segment of lanes per row (a power of two), 256 / segment rows to a block
        segment = 1 << (length - 1).bit_length()
        assert f"grid=({-(-rows // (256 // segment))},1,1) block=(256,1,1)" in names


@pytest.mark.parametrize("dtype", [np.float64, np.float16, ml_dtypes.bfloat16, np.int32,
                                   np.int8, np.int64, np.uint32, np.bool_])
def test_block_reductions_of_every_width(dtype, jax_x64):
    x = (np.arange(6 * 70).reshape(6, 70) % 11 - 5).astype(dtype)
    if dtype == np.bool_:
        check(lambda x: (x.any(1), x.all(1)), x)
    elif np.issubdtype(dtype, np.integer):
        check(lambda x: (x.max(1), x.min(1), x.sum(1)), x)
    else:
        tol = 5e-2 if np.dtype(dtype).itemsize == 2 else 1e-9
        check(lambda x: (x.max(1), (x / 8).sum(1)), x, rtol=tol, atol=tol)


@pytest.mark.parametrize("n", [1, 4095, 4096 * 33 + 7])
def test_full_reductions_in_blocks(rng, n):
    # 4096 * 33 + 7 elements: 1024 rows of 132 (a block each), the 7 left over and the 1024
    # partials each combined by one block
    x = rng.standard_normal(n, np.float32)
    exe = check(lambda x: (x.sum(), x.max(), jnp.abs(x).min()), x, rtol=1e-4, atol=1e-3)
    names = " ".join(t.name for t in exe.thunks())
    if n > 4096:
        assert "grid=(1024,1,1) block=(160,1,1)" in names


def test_softmax_and_layer_norm_rows(rng):
    x = rng.standard_normal((37, 1000), np.float32) * 4

    def layer_norm(x):
        mu = x.mean(-1, keepdims=True)
        return (x - mu) / jnp.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + 1e-5)
    check(lambda x: (jax.nn.softmax(x, axis=-1), layer_norm(x), jax.nn.logsumexp(x, -1)), x,
          rtol=1e-4, atol=1e-5)


def test_block_reductions_run_as_fibers(rng, monkeypatch):
    # the kernels read only shared memory they wrote: zeroed or poisoned, the same results
    x = rng.standard_normal((9, 300), np.float32)
    for mode in ("zero", "poison"):
        monkeypatch.setenv("KILN_GPU_EMULATOR_SHARED", mode)
        exe = check(lambda x: x.sum(1), x, rtol=1e-4, atol=1e-4)
    bundle = __import__("json").loads(next(iter(exe._cache.values())).artifact.code)
    from kiln.runtime.gpu_emulator import retarget
    assert "call i32 @kiln_emu_run_block" in retarget(bundle["llvm_ir"], bundle["kernels"])


def test_column_reductions_tile_columns(rng):
    # 32 columns a block, the 300 rows split over 8 rows of threads (lowering/gpu/columns.py)
    x = rng.standard_normal((300, 70), np.float32)
    exe = check(lambda x: x.sum(0), x, rtol=1e-4, atol=1e-4)
    assert any("grid=(3,1,1) block=(32,8,1)" in t.name
               for t in exe.thunks() if t.kind == "kernel-launch")


# -- what the GPU target cannot run yet: named before legalization -------------------------

def test_custom_calls_are_named_with_their_location():
    program = """func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = stablehlo.custom_call @my_library_op(%x) {api_version = 2 : i32} : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}"""
    for target in ("gpu", "gpu-emulator"):
        with pytest.raises(KilnError) as info:
            kiln.compile(program, target=target)
        error = info.value
        assert "custom call 'my_library_op'" in error.message
        assert "not supported by the GPU target" in error.message
        assert error.location.endswith(":2:8") and "target='cpu'" in error.hint


def test_host_transfers_run_host_staged():
    # like collectives (test_gpu_plan_collectives.py); more in test_gpu_host_transfers.py
    program = """func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %t = stablehlo.create_token : !stablehlo.token
  %d, %t2 = "stablehlo.infeed"(%t) {infeed_config = ""} : (!stablehlo.token) -> (tensor<4xf32>, !stablehlo.token)
  %y = stablehlo.add %x, %d : tensor<4xf32>
  return %y : tensor<4xf32>
}"""
    exe = kiln.compile(program, target="gpu-emulator")
    exe.infeed(np.full(4, 2.0, np.float32))
    np.testing.assert_array_equal(exe(np.ones(4, np.float32))[0], np.full(4, 3.0))
    assert [t.kind for t in exe.thunks()] == ["custom-call", "kernel-launch"]


def test_jax_custom_calls_lowered_to_ops_still_run(rng):
    # approx_max_k is a custom call JAX emits; Kiln lowers it to ops, which the GPU runs
    x = rng.standard_normal((4, 64), np.float32)
    exe = check(lambda x: jax.lax.approx_max_k(x, 3)[0], x)
    np.testing.assert_allclose(exe(x), -np.sort(-x, axis=1)[:, :3], rtol=1e-6)


def test_block_reductions_of_fused_producers(rng):
    # the element computation fused into the reduction: indices (iota), a broadcast input,
    # a second input, and a scalar captured from the host
    x = rng.standard_normal((45, 130), np.float32)
    b = rng.standard_normal(130, np.float32)
    check(lambda x, b, s: ((x * jnp.arange(130, dtype=jnp.float32)).sum(1),
                           (x * b[None, :]).sum(1), jnp.abs(x - b).max(1),
                           (x * s).min(1), jnp.sum(x > 0, axis=1)),
          x, b, np.float32(1.5), rtol=1e-4, atol=1e-3)
