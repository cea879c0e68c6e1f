"""The executable issue's end-to-end check: a transformer block exported from JAX, compiled
ahead of time with `kiln compile -o`, then run from the `.kx` file with `kiln run`, gives
JAX's results."""
from __future__ import annotations

import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax import export

B, T, D, H, F = 2, 16, 32, 4, 64


def transformer_block(x, params):
    def layer_norm(v, gain):
        mean = v.mean(-1, keepdims=True)
        var = ((v - mean) ** 2).mean(-1, keepdims=True)
        return (v - mean) * jax.lax.rsqrt(var + 1e-5) * gain

    y = layer_norm(x, params["ln1"])
    q, k, v = jnp.split(y @ params["wqkv"], 3, axis=-1)
    heads = lambda a: a.reshape(B, T, H, D // H)  # noqa: E731
    scores = jnp.einsum("bqhd,bkhd->bhqk", heads(q), heads(k)) / np.sqrt(D // H)
    scores = jnp.where(jnp.tril(jnp.ones((T, T), bool)), scores, -1e9)
    attended = jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(scores, -1), heads(v))
    x = x + attended.reshape(B, T, D) @ params["wo"]
    return x + jax.nn.gelu(layer_norm(x, params["ln2"]) @ params["w1"]) @ params["w2"]


def test_compile_to_kx_then_run_matches_jax(tmp_path):
    rng = np.random.default_rng(7)
    f32 = lambda *s, scale=1.0: (rng.standard_normal(s) * scale).astype(np.float32)  # noqa: E731
    x = f32(B, T, D)
    params = {"ln1": 1 + f32(D, scale=0.1), "ln2": 1 + f32(D, scale=0.1),
              "wqkv": f32(D, 3 * D, scale=0.1), "wo": f32(D, D, scale=0.1),
              "w1": f32(D, F, scale=0.1), "w2": f32(F, D, scale=0.1)}
    exported = export.export(jax.jit(transformer_block))(x, params)
    (tmp_path / "block.jax").write_bytes(exported.serialize())
    # Inputs in the export's flat order (the params dict flattens by sorted key).
    flat, _ = jax.tree_util.tree_flatten((x, params))
    np.savez(tmp_path / "inputs.npz", *flat)

    def kiln(*args):
        done = subprocess.run([sys.executable, "-m", "kiln.cli.main", *map(str, args)],
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr
        return done

    kiln("compile", tmp_path / "block.jax", "-o", tmp_path / "block.kx")
    (tmp_path / "block.jax").unlink()  # the executable stands alone
    kiln("run", tmp_path / "block.kx", "--inputs", tmp_path / "inputs.npz",
         "--output", tmp_path / "out.npz")
    with np.load(tmp_path / "out.npz") as out:
        got = out["arr_0"]
    expected = np.asarray(jax.jit(transformer_block)(x, params))
    np.testing.assert_allclose(got, expected, rtol=2e-4, atol=2e-5)
