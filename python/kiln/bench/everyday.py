"""Everyday workloads: what a new user tries first, beyond the headline models of workloads.py.

One per op family and dtype that XLA:CPU accelerates (issue #13's table and its neighbours):
scans, mixed-precision and skinny products, convolutions in other layouts and their gradients,
FFTs, arg-reductions and top_k, RNG and special functions, data movement, small loops, and the
fixed cost of a call.
"""
from __future__ import annotations

import numpy as np

from .base import Workload, _f32, _rng


def _bf16(rng, *shape, scale=1.0):
    import ml_dtypes
    return _f32(rng, *shape, scale=scale).astype(ml_dtypes.bfloat16)


def _i8(rng, *shape):
    return rng.integers(-128, 128, shape).astype(np.int8)


def _conv(x, w, strides=(1, 1), padding="SAME", dn=("NHWC", "HWIO", "NHWC"), groups=1,
          lhs_dilation=None, rhs_dilation=None):
    import jax
    return jax.lax.conv_general_dilated(x, w, strides, padding, lhs_dilation=lhs_dilation,
                                        rhs_dilation=rhs_dilation, dimension_numbers=dn,
                                        feature_group_count=groups)


def _cumsum():
    import jax.numpy as jnp
    return (lambda x: jnp.cumsum(x)), (_f32(_rng(20), 1024 * 1024),)


def _cumsum_rows():
    import jax.numpy as jnp
    return (lambda x: jnp.cumsum(x, axis=1)), (_f32(_rng(21), 1024, 1024),)


def _cummax():
    import jax
    return (lambda x: jax.lax.cummax(x, axis=0)), (_f32(_rng(22), 4096, 256),)


def _conv_grad_input():
    import jax
    rng = _rng(23)
    x, w = _f32(rng, 8, 56, 56, 64), _f32(rng, 3, 3, 64, 128, scale=0.05)

    def grad(x, w):
        return jax.grad(lambda x: (_conv(x, w, strides=(2, 2)) ** 2).sum())(x)
    return grad, (x, w)


def _conv_grad_weight():
    import jax
    rng = _rng(24)
    x, w = _f32(rng, 8, 56, 56, 64), _f32(rng, 3, 3, 64, 64, scale=0.05)

    def grad(w, x):
        return jax.grad(lambda w: (_conv(x, w) ** 2).sum())(w)
    return grad, (w, x)


def _conv_nchw():
    rng = _rng(25)
    return (lambda x, w: _conv(x, w, dn=("NCHW", "OIHW", "NCHW"))), \
        (_f32(rng, 8, 64, 56, 56), _f32(rng, 64, 64, 3, 3, scale=0.05))


def _conv_depthwise():
    rng = _rng(26)
    return (lambda x, w: _conv(x, w, groups=128)), \
        (_f32(rng, 8, 56, 56, 128), _f32(rng, 3, 3, 1, 128, scale=0.1))


def _conv_dilated():
    rng = _rng(27)
    return (lambda x, w: _conv(x, w, rhs_dilation=(2, 2))), \
        (_f32(rng, 4, 64, 64, 64), _f32(rng, 3, 3, 64, 64, scale=0.05))


def _matmul_bf16_f32():
    import jax
    rng = _rng(28)
    return (lambda a, b: jax.lax.dot(a, b, preferred_element_type=np.float32)), \
        (_bf16(rng, 768, 768), _bf16(rng, 768, 768))


def _matmul_bf16():
    rng = _rng(29)
    return (lambda a, b: a @ b), (_bf16(rng, 1024, 1024), _bf16(rng, 1024, 1024))


def _matmul_int8():
    import jax
    rng = _rng(30)
    return (lambda a, b: jax.lax.dot(a, b, preferred_element_type=np.int32)), \
        (_i8(rng, 768, 768), _i8(rng, 768, 768))


def _matmul_f64():
    rng = _rng(31)
    return (lambda a, b: a @ b), (_f32(rng, 512, 512).astype(np.float64),
                                  _f32(rng, 512, 512).astype(np.float64))


def _matmul_c64():
    rng = _rng(32)
    c = lambda: (_f32(rng, 384, 384) + 1j * _f32(rng, 384, 384)).astype(np.complex64)
    return (lambda a, b: a @ b), (c(), c())


def _gemv():
    rng = _rng(33)
    return (lambda a, x: a @ x), (_f32(rng, 4096, 4096), _f32(rng, 4096))


def _batched_matmul():
    rng = _rng(34)
    return (lambda a, b: a @ b), (_f32(rng, 64, 128, 256), _f32(rng, 64, 256, 128))


def _rfft2():
    import jax.numpy as jnp
    return (lambda x: jnp.fft.rfft2(x)), (_f32(_rng(35), 512, 512),)


def _fft_complex():
    import jax.numpy as jnp
    rng = _rng(36)
    return (lambda x: jnp.fft.fft(x)), \
        ((_f32(rng, 65536) + 1j * _f32(rng, 65536)).astype(np.complex64),)


def _fft_odd():
    import jax.numpy as jnp
    rng = _rng(37)  # 1000 = 2^3 5^3: not a power of two
    return (lambda x: jnp.fft.fft(x, axis=-1)), \
        ((_f32(rng, 64, 1000) + 1j * _f32(rng, 64, 1000)).astype(np.complex64),)


def _top_k():
    import jax
    return (lambda x: jax.lax.top_k(x, 8)), (_f32(_rng(38), 4096, 512),)


def _argmax():
    import jax.numpy as jnp
    return (lambda x: jnp.argmax(x, axis=1)), (_f32(_rng(39), 4096, 1024),)


def _argsort():
    import jax.numpy as jnp
    return (lambda x: jnp.argsort(x, axis=-1)), (_f32(_rng(40), 512, 1024),)


def _reduce_cols():
    return (lambda x: x.sum(axis=0)), (_f32(_rng(41), 4096, 1024),)


def _reduce_max_rows():
    return (lambda x: x.max(axis=1)), (_f32(_rng(42), 4096, 1024),)


def _threefry_normal():
    import jax
    key = np.asarray(jax.random.key_data(jax.random.PRNGKey(0)))
    return (lambda k: jax.random.normal(k, (4 * 1024 * 1024,), np.float32)), (key,)


def _erf_lgamma():
    import jax
    x = np.abs(_f32(_rng(43), 4 * 1024 * 1024)) + 0.1
    return (lambda x: jax.scipy.special.erf(x) + jax.scipy.special.gammaln(x)), (x,)


def _exp_log_f64():
    import jax.numpy as jnp
    x = np.abs(_f32(_rng(44), 2 * 1024 * 1024)).astype(np.float64) + 0.5
    return (lambda x: jnp.log(x) * jnp.exp(-x)), (x,)


def _concat_pad_slice():
    import jax.numpy as jnp
    rng = _rng(45)

    def f(a, b):
        c = jnp.concatenate([a, b], axis=1)
        return jnp.pad(c, ((1, 1), (2, 2)))[::2, 1::3]
    return f, (_f32(rng, 2048, 1024), _f32(rng, 2048, 1024))


def _transpose3d():
    import jax.numpy as jnp
    return (lambda x: jnp.transpose(x, (2, 0, 1))), (_f32(_rng(46), 256, 256, 64),)


def _gather_rows():
    rng = _rng(47)
    return (lambda t, i: t[i]), (_f32(rng, 100000, 128), rng.integers(0, 100000, 65536).astype(np.int32))


def _scatter_add():
    import jax.numpy as jnp
    rng = _rng(48)
    return (lambda i, u: jnp.zeros((100000, 64), np.float32).at[i].add(u)), \
        (rng.integers(0, 100000, 65536).astype(np.int32), _f32(rng, 65536, 64))


def _fori_tiny():
    import jax

    def f(x):
        return jax.lax.fori_loop(0, 2000, lambda i, c: c * 0.999 + 1.0, x)
    return f, (_f32(_rng(49), 4),)


def _rnn_scan():
    import jax
    import jax.numpy as jnp
    rng = _rng(50)

    def f(xs, w, u):
        def step(h, x):
            h = jnp.tanh(x @ w + h @ u)
            return h, h
        return jax.lax.scan(step, jnp.zeros((32, 256), np.float32), xs)[1]
    return f, (_f32(rng, 200, 32, 128), _f32(rng, 128, 256, scale=0.1), _f32(rng, 256, 256, scale=0.06))


def _call_overhead():
    rng = _rng(51)
    return (lambda a, b: a + b), (_f32(rng, 16), _f32(rng, 16))


def _decode_attention():
    import jax
    import jax.numpy as jnp
    rng = _rng(52)

    def f(q, k, v):
        s = jnp.einsum("hd,thd->ht", q, k) * 0.125
        return jnp.einsum("ht,thd->hd", jax.nn.softmax(s, axis=-1), v)
    return f, (_f32(rng, 16, 128), _f32(rng, 4096, 16, 128), _f32(rng, 4096, 16, 128))


def _layernorm_bf16():
    import jax
    rng = _rng(53)

    def ln(x, g, b):
        x32 = x.astype(np.float32)
        m = x32.mean(-1, keepdims=True)
        v = ((x32 - m) ** 2).mean(-1, keepdims=True)
        return ((x32 - m) * jax.lax.rsqrt(v + 1e-5) * g + b).astype(x.dtype)
    return ln, (_bf16(rng, 4096, 1024), _f32(rng, 1024), _f32(rng, 1024))


def _maxpool_grad():
    import jax

    def pool(x):
        return jax.lax.reduce_window(x, -np.inf, jax.lax.max, (1, 3, 3, 1), (1, 2, 2, 1), "SAME")
    return (lambda x: jax.grad(lambda x: pool(x).sum())(x)), (_f32(_rng(54), 8, 112, 112, 64),)


def _avgpool():
    import jax
    return (lambda x: jax.lax.reduce_window(x, 0.0, jax.lax.add, (1, 3, 3, 1), (1, 1, 1, 1),
                                            "SAME") / 9.0), (_f32(_rng(55), 8, 112, 112, 64),)


def _int_elementwise():
    import jax.numpy as jnp
    rng = _rng(56)
    a = rng.integers(-1000, 1000, 8 * 1024 * 1024).astype(np.int32)
    return (lambda a: jnp.where(a > 0, a * 3 + 1, a >> 2)), (a,)


MB = 1024 * 1024
EVERYDAY: list[Workload] = [
    Workload("cumsum_1m", _cumsum, bytes=2 * 4 * MB, tol=(1e-3, 5e-1), note="jnp.cumsum 1M f32"),
    Workload("cumsum_rows", _cumsum_rows, bytes=2 * 4 * MB, tol=(1e-3, 1e-2), note="cumsum axis 1, 1024^2"),
    Workload("cummax", _cummax, bytes=2 * 4 * MB, tol=(0, 0), note="lax.cummax axis 0, 4096x256"),
    Workload("conv_grad_input", _conv_grad_input, flops=2 * 8 * 28 * 28 * 128 * 64 * 9 * 2,
             tol=(1e-2, 1e-2), note="d/dx of stride-2 3x3 NHWC conv 8x56x56x64->128"),
    Workload("conv_grad_weight", _conv_grad_weight, flops=2 * 8 * 56 * 56 * 64 * 64 * 9 * 2,
             tol=(1e-2, 1e-1), note="d/dw of 3x3 NHWC conv 8x56x56x64"),
    Workload("conv_nchw", _conv_nchw, flops=2 * 8 * 56 * 56 * 64 * 64 * 9, tol=(1e-2, 1e-2),
             note="NCHW/OIHW 3x3 conv 8x64x56x56"),
    Workload("conv_depthwise", _conv_depthwise, flops=2 * 8 * 56 * 56 * 128 * 9, tol=(1e-3, 1e-3),
             note="depthwise 3x3, 8x56x56x128"),
    Workload("conv_dilated", _conv_dilated, flops=2 * 4 * 64 * 64 * 64 * 64 * 9, tol=(1e-2, 1e-2),
             note="dilation-2 3x3 conv 4x64x64x64"),
    Workload("matmul_bf16_f32", _matmul_bf16_f32, flops=2 * 768 ** 3, tol=(1e-3, 1e-2),
             note="bf16 x bf16 -> f32, 768^2"),
    Workload("matmul_bf16", _matmul_bf16, flops=2 * 1024 ** 3, tol=(2e-2, 1e-1), note="bf16 1024^2"),
    Workload("matmul_int8", _matmul_int8, flops=2 * 768 ** 3, tol=(0, 0), note="int8 x int8 -> int32, 768^2"),
    Workload("matmul_f64", _matmul_f64, flops=2 * 512 ** 3, tol=(1e-9, 1e-9), note="f64 512^2", x64=True),
    Workload("matmul_c64", _matmul_c64, flops=8 * 384 ** 3, tol=(1e-3, 1e-2), note="complex64 384^2"),
    Workload("gemv", _gemv, flops=2 * 4096 ** 2, tol=(1e-3, 1e-2), note="f32 4096^2 x 4096"),
    Workload("batched_matmul", _batched_matmul, flops=2 * 64 * 128 * 256 * 128, tol=(1e-3, 1e-2),
             note="64 x (128x256 @ 256x128)"),
    Workload("rfft2", _rfft2, bytes=2 * 4 * 512 * 512, tol=(1e-3, 1e-1), note="rfft2 512^2"),
    Workload("fft_64k", _fft_complex, bytes=2 * 8 * 65536, tol=(1e-3, 1e-1), note="c64 FFT 64k points"),
    Workload("fft_1000", _fft_odd, bytes=2 * 8 * 64 * 1000, tol=(1e-3, 1e-2), note="c64 FFT 64x1000 (non-pow2)"),
    Workload("top_k", _top_k, bytes=4 * 4096 * 512, tol=(0, 0), note="lax.top_k k=8 over 4096x512"),
    Workload("argmax_rows", _argmax, bytes=4 * 4096 * 1024, tol=(0, 0), note="argmax axis 1, 4096x1024"),
    Workload("argsort", _argsort, bytes=2 * 4 * 512 * 1024, tol=(0, 0), note="argsort rows 512x1024"),
    Workload("reduce_cols", _reduce_cols, bytes=4 * 4096 * 1024, tol=(1e-3, 1e-2), note="sum axis 0, 4096x1024"),
    Workload("reduce_max_rows", _reduce_max_rows, bytes=4 * 4096 * 1024, tol=(0, 0), note="max axis 1, 4096x1024"),
    Workload("threefry_normal", _threefry_normal, bytes=4 * 4 * MB, tol=(1e-5, 1e-5),
             note="jax.random.normal 4M (threefry)"),
    Workload("erf_lgamma", _erf_lgamma, bytes=2 * 4 * 4 * MB, tol=(1e-4, 1e-4), note="erf + lgamma 4M f32"),
    Workload("exp_log_f64", _exp_log_f64, bytes=2 * 8 * 2 * MB, tol=(1e-12, 1e-12), note="log(x)*exp(-x) 2M f64", x64=True),
    Workload("concat_pad_slice", _concat_pad_slice, bytes=4 * 4 * 2048 * 1024, tol=(0, 0),
             note="concatenate + pad + strided slice"),
    Workload("transpose3d", _transpose3d, bytes=2 * 4 * 256 * 256 * 64, tol=(0, 0), note="(2,0,1) of 256x256x64"),
    Workload("gather_rows", _gather_rows, bytes=2 * 4 * 65536 * 128, tol=(0, 0), note="65536 rows of 100000x128"),
    Workload("scatter_add", _scatter_add, bytes=2 * 4 * 65536 * 64, tol=(1e-5, 1e-5), note="65536 rows into 100000x64"),
    Workload("fori_tiny", _fori_tiny, bytes=16 * 2000, tol=(1e-4, 1e-4), note="fori_loop 2000 steps on 4 floats"),
    Workload("rnn_scan", _rnn_scan, flops=200 * 2 * 32 * (128 + 256) * 256, tol=(1e-3, 1e-3),
             note="lax.scan tanh RNN 200 steps b32 h256"),
    Workload("call_overhead", _call_overhead, bytes=3 * 4 * 16, tol=(0, 0), note="16-element add, one call"),
    Workload("decode_attention", _decode_attention, flops=2 * 2 * 16 * 4096 * 128, tol=(1e-3, 1e-3),
             note="one query, 4k cache, 16 heads x128"),
    Workload("layernorm_bf16", _layernorm_bf16, bytes=2 * 2 * 4096 * 1024, tol=(1e-2, 5e-2),
             note="bf16 in/out, f32 statistics, 4096x1024"),
    Workload("maxpool_grad", _maxpool_grad, bytes=2 * 4 * 8 * 112 * 112 * 64, tol=(0, 0),
             note="grad of 3x3/2 max pool 8x112x112x64"),
    Workload("avgpool", _avgpool, bytes=2 * 4 * 8 * 112 * 112 * 64, tol=(1e-4, 1e-4),
             note="3x3/1 sum pool 8x112x112x64"),
    Workload("int_elementwise", _int_elementwise, bytes=2 * 4 * 8 * MB, tol=(0, 0),
             note="int32 where/mul/shift 8M"),
]
