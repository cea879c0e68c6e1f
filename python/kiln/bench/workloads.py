"""The benchmark workloads: each is a jax function plus inputs, lowered to StableHLO text with
jax so that Kiln and every peer compile the very same program.

`flops` / `bytes` give the work one call does (for GFLOP/s or GB/s); `tol` is the (rtol, atol)
Kiln's outputs must meet against the peer's.
"""
from __future__ import annotations

import numpy as np

from .base import Workload, _f32, _rng  # noqa: F401 - Workload is this module's API too


def _gelu(x):
    import jax.numpy as jnp
    # tanh form, as jax.nn.gelu(approximate=True): what XLA sees from most models
    return 0.5 * x * (1.0 + jnp.tanh(0.7978845608 * (x + 0.044715 * x * x * x)))


def _matmul():
    rng = _rng(1)
    return (lambda a, b: a @ b), (_f32(rng, 1024, 1024), _f32(rng, 1024, 1024))


def _mlp_params(rng):
    return (_f32(rng, 1024, 4096, scale=0.03), _f32(rng, 4096, scale=0.1),
            _f32(rng, 4096, 1024, scale=0.015), _f32(rng, 1024, scale=0.1))


def _mlp_fwd(x, w1, b1, w2, b2):
    return _gelu(x @ w1 + b1) @ w2 + b2


def _mlp():
    rng = _rng(2)
    return _mlp_fwd, (_f32(rng, 256, 1024), *_mlp_params(rng))


def _mlp_grad():
    import jax
    rng = _rng(3)

    def loss(params, x):
        return (_mlp_fwd(x, *params) ** 2).mean()

    def step(x, w1, b1, w2, b2):
        return jax.grad(loss)((w1, b1, w2, b2), x)
    return step, (_f32(rng, 256, 1024), *_mlp_params(rng))


def _conv_block():
    import jax
    import jax.numpy as jnp
    rng = _rng(4)

    def conv(x, w):
        return jax.lax.conv_general_dilated(x, w, (1, 1), "SAME",
                                            dimension_numbers=("NHWC", "HWIO", "NHWC"))

    def bn(x, g, b, m, v):
        return (x - m) * jax.lax.rsqrt(v + 1e-5) * g + b

    def block(x, w1, w2, g1, b1, m1, v1, g2, b2, m2, v2):
        y = jnp.maximum(bn(conv(x, w1), g1, b1, m1, v1), 0.0)
        y = bn(conv(y, w2), g2, b2, m2, v2)
        return jnp.maximum(y + x, 0.0)
    c = 64
    bnp = lambda: (_f32(rng, c, scale=0.1) + 1, _f32(rng, c, scale=0.1), _f32(rng, c, scale=0.1),
                   np.abs(_f32(rng, c)) + 0.5)
    return block, (_f32(rng, 8, 56, 56, c), _f32(rng, 3, 3, c, c, scale=0.06),
                   _f32(rng, 3, 3, c, c, scale=0.06), *bnp(), *bnp())


def _attention():
    import jax
    rng = _rng(5)

    def attn(q, k, v):
        s = jax.numpy.einsum("bhqd,bhkd->bhqk", q, k) * 0.125
        return jax.numpy.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(s, axis=-1), v)
    shape = (4, 8, 512, 64)
    return attn, (_f32(rng, *shape), _f32(rng, *shape), _f32(rng, *shape))


def _layernorm():
    rng = _rng(6)

    def ln(x, g, b):
        m = x.mean(-1, keepdims=True)
        v = ((x - m) ** 2).mean(-1, keepdims=True)
        import jax
        return (x - m) * jax.lax.rsqrt(v + 1e-5) * g + b
    return ln, (_f32(rng, 8192, 1024), _f32(rng, 1024), _f32(rng, 1024))


def _softmax():
    import jax
    rng = _rng(7)
    return (lambda x: jax.nn.softmax(x, axis=-1)), (_f32(rng, 8192, 1024),)


def _gelu_w():
    rng = _rng(8)
    return _gelu, (_f32(rng, 4 * 1024 * 1024),)


def _reduce():
    rng = _rng(9)
    return (lambda x: x.sum()), (_f32(rng, 16 * 1024 * 1024),)


def _embedding():
    import jax
    rng = _rng(10)

    def emb(table, ids, g):
        out = table[ids]
        grad = jax.numpy.zeros_like(table).at[ids].add(g)
        return out, grad
    return emb, (_f32(rng, 50000, 256), rng.integers(0, 50000, 8192).astype(np.int32),
                 _f32(rng, 8192, 256))


def _sort():
    rng = _rng(11)
    import jax.numpy as jnp
    return (lambda x: jnp.sort(x)), (_f32(rng, 1024 * 1024),)


def _transformer():
    import jax
    import jax.numpy as jnp
    rng = _rng(12)
    b, t, d, h, f = 4, 256, 512, 8, 2048

    def ln(x, g):
        m = x.mean(-1, keepdims=True)
        v = ((x - m) ** 2).mean(-1, keepdims=True)
        return (x - m) * jax.lax.rsqrt(v + 1e-5) * g

    def block(x, wqkv, wo, w1, w2, g1, g2):
        y = ln(x, g1)
        qkv = (y @ wqkv).reshape(b, t, 3, h, d // h)
        q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]
        s = jnp.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(d // h).astype(np.float32)
        mask = jnp.tril(jnp.ones((t, t), bool))
        s = jnp.where(mask, s, -1e9)
        a = jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(s, axis=-1), v).reshape(b, t, d)
        x = x + a @ wo
        return x + _gelu(ln(x, g2) @ w1) @ w2
    return block, (_f32(rng, b, t, d), _f32(rng, d, 3 * d, scale=0.04), _f32(rng, d, d, scale=0.04),
                   _f32(rng, d, f, scale=0.04), _f32(rng, f, d, scale=0.02),
                   1 + _f32(rng, d, scale=0.1), 1 + _f32(rng, d, scale=0.1))


def _mlp_flops(b=256, i=1024, h=4096):
    return 2 * b * i * h * 2


def _tf_flops(b=4, t=256, d=512, f=2048):
    n = b * t
    return 2 * n * d * 3 * d + 2 * 2 * b * t * t * d + 2 * n * d * d + 2 * 2 * n * d * f


# The headline models: what `kiln bench` started with.
HEADLINE: list[Workload] = [
    Workload("matmul", _matmul, flops=2 * 1024 ** 3, tol=(1e-3, 1e-2), note="f32 1024x1024x1024",
             numpy_fn=lambda a, b: (a @ b,)),
    Workload("mlp", _mlp, flops=_mlp_flops(), note="b256 1024-4096-1024 bias+gelu"),
    Workload("mlp_grad", _mlp_grad, flops=3 * _mlp_flops(), tol=(1e-2, 1e-5), note="training step grads"),
    Workload("conv_block", _conv_block, flops=2 * 2 * 8 * 56 * 56 * 64 * 64 * 9,
             tol=(1e-2, 1e-2), note="8x56x56x64 2x conv3x3+bn+relu, residual"),
    Workload("attention", _attention, flops=2 * 2 * 4 * 8 * 512 * 512 * 64,
             note="B4 H8 T512 D64 softmax"),
    Workload("layernorm", _layernorm, bytes=2 * 8192 * 1024 * 4, note="8192x1024"),
    Workload("softmax", _softmax, bytes=2 * 8192 * 1024 * 4, note="8192x1024"),
    Workload("gelu", _gelu_w, bytes=2 * 4 * 1024 * 1024 * 4, note="4M f32 elementwise"),
    Workload("reduce_sum", _reduce, bytes=16 * 1024 * 1024 * 4, tol=(1e-3, 1e-1), note="16M f32 -> scalar"),
    Workload("embedding", _embedding, bytes=2 * 8192 * 256 * 4 + 2 * 50000 * 256 * 4,
             note="gather 50k x256 by 8192 ids + scatter-add grad"),
    Workload("sort", _sort, bytes=2 * 1024 * 1024 * 4, tol=(0, 0), note="1M f32",
             skip={"iree": "IREE 3.13 llvm-cpu's sort did not finish one call in 4 minutes "
                           "(observed; its CPU sort is a simple loop nest)"}),
    Workload("transformer", _transformer, flops=_tf_flops(), tol=(5e-3, 5e-3),
             note="b4 t256 d512 h8 ffn2048 fwd"),
]


from .everyday import EVERYDAY  # noqa: E402  (it builds on the helpers above)

WORKLOADS: list[Workload] = HEADLINE + EVERYDAY
SUITES = {"headline": HEADLINE, "everyday": EVERYDAY}


def by_name(names: list[str] | None) -> list[Workload]:
    """Workloads by name, or whole suites by suite name (`headline`, `everyday`)."""
    if not names:
        return list(WORKLOADS)
    known = {w.name: w for w in WORKLOADS}
    from ..errors import KilnError
    missing = [n for n in names if n not in known and n not in SUITES]
    if missing:
        raise KilnError(f"unknown workload(s): {', '.join(missing)}",
                        hint="suites: " + ", ".join(SUITES) + "; workloads: " + ", ".join(known))
    picked = [w for n in names for w in (SUITES[n] if n in SUITES else [known[n]])]
    return [w for i, w in enumerate(picked) if all(w is not p for p in picked[:i])]
