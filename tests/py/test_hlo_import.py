"""HLO text -> StableHLO importer: numerics against JAX through the StableHLO interpreter,
plus parser/error behaviour on hand-written HLO."""
from __future__ import annotations

import numpy as np
import pytest

from kiln.errors import KilnError
from kiln.frontend.hlo.emitter import dense_attr
from kiln.layout import ELEMENT_TYPES, Shape
from kiln.frontend.hlo import (SUPPORTED_OPCODES, hlo_to_stablehlo, is_hlo_text, parse_module,
                               stablehlo_to_hlo)

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
from jax import lax  # noqa: E402


def run_stablehlo(text: str, args):
    """Run `main` of a StableHLO module in the reference interpreter."""
    from torch_mlir import ir
    from torch_mlir._mlir_libs import _stablehlo

    ctx = ir.Context()
    _stablehlo.register_dialect(ctx)
    with ctx, ir.Location.unknown():
        module = ir.Module.parse(text)
        attrs = [ir.Attribute.parse(dense_attr(np.asarray(a), shape_of(a))) for a in args]
        outs = _stablehlo.eval_module(module, attrs)
        return [np.array(o) for o in outs]


_HLO_OF_DTYPE = {e.dtype: e.hlo for e in reversed(list(ELEMENT_TYPES.values()))
                 if e.dtype is not None}


def shape_of(a) -> Shape:
    a = np.asarray(a)
    return Shape(_HLO_OF_DTYPE[a.dtype], list(a.shape))


def flat_outputs(out):
    return [np.asarray(x) for x in jax.tree_util.tree_leaves(out)]


def check_program(f, *args, optimized=True, rtol=2e-5, atol=2e-5):
    """Import both the pre-optimization and the compiled HLO of jit(f) and compare the
    interpreter's results with JAX's."""
    args = [np.asarray(a) for a in args]
    lowered = jax.jit(f, keep_unused=True).lower(*args)
    compiled = lowered.compile()  # one XLA compile gives both the reference and the dump
    expected = flat_outputs(compiled(*args))
    texts = [("hlo", lowered.as_text(dialect="hlo"))]
    if optimized:
        texts.append(("optimized", compiled.as_text()))
    for kind, text in texts:
        mlir = hlo_to_stablehlo(text, f"<{kind}>")
        # Export back to HLO and import again: same numerics, and a fixed point after that.
        again = hlo_to_stablehlo(stablehlo_to_hlo(mlir), f"<{kind} round trip>")
        assert hlo_to_stablehlo(stablehlo_to_hlo(again)) == again, kind
        variants = [(kind, mlir)]
        if kind == "hlo":  # the round-trip numerics once per program keeps the suite fast
            variants.append((kind + " round trip", again))
        for variant, m in variants:
            got = run_stablehlo(m, args)
            assert len(got) == len(expected), (variant, m)
            for g, e in zip(got, expected):
                assert g.shape == e.shape, (variant, g.shape, e.shape)
                if e.dtype.kind in "iub":
                    np.testing.assert_array_equal(g, e, err_msg=variant)
                else:
                    np.testing.assert_allclose(g, e, rtol=rtol, atol=atol, err_msg=variant)


rng = np.random.default_rng(0)


def randn(*shape):
    return rng.standard_normal(shape).astype(np.float32)


# ----------------------------------------------------------------------------- programs

def test_mlp_forward_backward():
    def loss(params, x, y):
        w1, b1, w2, b2 = params
        h = jnp.tanh(x @ w1 + b1)
        logits = h @ w2 + b2
        return jnp.mean((jax.nn.log_softmax(logits) * y).sum(-1))

    def step(w1, b1, w2, b2, x, y):
        return jax.value_and_grad(loss)((w1, b1, w2, b2), x, y)

    y = np.eye(3, dtype=np.float32)[[0, 1, 2, 1]]
    check_program(step, randn(5, 8), randn(8), randn(8, 3), randn(3), randn(4, 5), y)


def test_cnn_conv_pool_and_gradient():
    def net(w, x):
        y = lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
        y = jax.nn.relu(y)
        y = lax.reduce_window(y, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
        return jnp.sum(y ** 2)

    check_program(jax.value_and_grad(net), randn(3, 3, 2, 4), randn(2, 6, 6, 2), rtol=1e-4, atol=1e-4)


def test_strided_grouped_conv():
    def f(x, w):
        return lax.conv_general_dilated(x, w, (2, 1), [(1, 0), (2, 1)], lhs_dilation=(1, 2),
                                        rhs_dilation=(2, 1), feature_group_count=2)

    check_program(f, randn(2, 4, 7, 6), randn(6, 2, 2, 3), rtol=1e-4, atol=1e-4)


def test_attention():
    def attn(q, k, v):
        s = jnp.einsum("bqd,bkd->bqk", q, k) / np.sqrt(q.shape[-1])
        return jnp.einsum("bqk,bkd->bqd", jax.nn.softmax(s, axis=-1), v)

    check_program(attn, randn(2, 4, 8), randn(2, 5, 8), randn(2, 5, 8))


def test_lstm_scan():
    def lstm(wx, wh, xs):
        def cell(carry, x):
            h, c = carry
            z = x @ wx + h @ wh
            i, f, g, o = jnp.split(z, 4, axis=-1)
            c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
            h = jax.nn.sigmoid(o) * jnp.tanh(c)
            return (h, c), h

        h0 = jnp.zeros((2, 3))
        (h, c), hs = lax.scan(cell, (h0, h0), xs)
        return hs.sum(), jax.grad(lambda wx: lax.scan(cell, (h0, h0), xs)[0][0].sum())(wx)

    check_program(lstm, randn(4, 12), randn(3, 12), randn(5, 2, 4), rtol=1e-4, atol=1e-4)


def test_sort_and_argsort():
    def f(x):
        return jnp.sort(x, axis=1), jnp.argsort(x, axis=0), lax.sort((x[0], x[1]), num_keys=1)

    check_program(f, randn(3, 7))


def test_scatter_gather():
    def f(x, idx, upd):
        y = x.at[idx].add(upd)
        return y, y[idx[::-1]], jnp.take_along_axis(x[:4], idx[:, None] % 3, axis=1)

    check_program(f, randn(6, 3), np.array([4, 0, 2, 0], np.int32), randn(4, 3))


def test_fft_structure():
    # The reference interpreter aborts on complex<f32> FFTs, so only the import is checked.
    def f(x):
        c = jnp.fft.fft(x.astype(jnp.complex64))
        return jnp.real(c), jnp.fft.irfft(jnp.fft.rfft(x), n=8)

    for text in (jax.jit(f).lower(randn(2, 8)).as_text(dialect="hlo"),
                 jax.jit(f).lower(randn(2, 8)).compile().as_text()):
        mlir = hlo_to_stablehlo(text)
        assert "stablehlo.fft %" in mlir and "type =  FFT" not in mlir
        for kind, ty in (("FFT", "complex<f32>"), ("RFFT", "f32"), ("IRFFT", "complex<f32>")):
            assert f"type = {kind}, length = [8] : (tensor<2x" in mlir
            assert f"xcomplex<f32>>" in mlir and ty in mlir


def test_random_threefry():
    def f(key):
        k1, k2 = jax.random.split(jax.random.wrap_key_data(key))
        return jax.random.normal(k1, (3, 4)), jax.random.randint(k2, (5,), 0, 10)

    check_program(f, np.array([0, 42], np.uint32), rtol=1e-5, atol=1e-5)


def test_cumsum_and_friends():
    def f(x):
        return jnp.cumsum(x, axis=0), jnp.cumprod(x, axis=1), lax.cummax(x, axis=1)

    check_program(f, randn(5, 4), rtol=1e-4, atol=1e-4)


def test_control_flow_cond_fori_and_switch():
    def f(x, n):
        y = lax.cond(x.sum() > 0, lambda v: v * 2, lambda v: -v, x)
        z = lax.fori_loop(0, 3, lambda i, v: v + i * v, y)
        w = lax.switch(n, [lambda v: v + 1, lambda v: v * 3, lambda v: v - 7], z)
        return w

    check_program(f, randn(4), np.int32(1))


def test_elementwise_zoo():
    def f(x, y, i, j):
        out = [jnp.abs(x), jnp.arctan2(x, y), jnp.cbrt(x), jnp.ceil(x), jnp.clip(x, -0.5, 0.5),
               jnp.cos(x), x / y, jnp.exp(x), jnp.expm1(x), jnp.floor(x), jnp.isfinite(x / 0),
               jnp.log(jnp.abs(x) + 1), jnp.log1p(jnp.abs(x)), jax.nn.sigmoid(x),
               jnp.maximum(x, y), jnp.minimum(x, y), x * y, -x, jnp.abs(x) ** y,
               jnp.fmod(x, y), jnp.round(x), lax.rsqrt(jnp.abs(x) + 1), jnp.sign(x),
               jnp.sin(x), jnp.sqrt(jnp.abs(x)), x - y, jnp.tan(x * 0.5), jnp.tanh(x),
               lax.erf(x), lax.round(x, lax.RoundingMethod.AWAY_FROM_ZERO),
               lax.reduce_precision(x, 5, 10), lax.bitcast_convert_type(x, jnp.int32),
               i & j, i | j, i ^ j, ~i, lax.clz(i), lax.population_count(i),
               i << (j & 7), lax.shift_right_arithmetic(i, j & 7),
               lax.shift_right_logical(i, j & 7), i // (j | 1), i % (j | 1), i.astype(jnp.float32),
               x > y, x == y, jnp.where(x > y, x, y), lax.complex(x, y).imag,
               jnp.logical_not(x > 0), lax.integer_pow(x, 3)]
        return out

    x = randn(6)
    y = randn(6) + 3
    i = rng.integers(-100, 100, 6).astype(np.int32)
    j = rng.integers(1, 100, 6).astype(np.int32)
    check_program(f, x, y, i, j, rtol=1e-5, atol=1e-6)


def test_shape_ops():
    def f(x, s):
        return (jnp.pad(x, ((1, 2), (0, 1))), lax.pad(x, 0.0, ((1, -1, 1), (0, 0, 2))),
                jnp.concatenate([x, x * 2], axis=1), x[::-1, 1:3], x.T, x.reshape(2, 6),
                lax.dynamic_slice(x, (s, 1), (2, 2)), lax.dynamic_update_slice(x, x[:1, :2], (s, s)),
                jnp.arange(5), jnp.broadcast_to(x[:, :1], (3, 4)), jnp.flip(x, 1),
                lax.top_k(x, 2)[0], lax.top_k(x, 2)[1])

    check_program(f, randn(3, 4), np.int32(1))


def test_reductions_multi_operand_and_map():
    def f(x):
        return (jnp.argmax(x, axis=1), jnp.max(x, axis=0), jnp.prod(x), jnp.any(x > 1),
                jnp.var(x, axis=1))

    check_program(f, randn(4, 5), rtol=1e-4, atol=1e-5)


def test_float64_and_bool_literals():
    def f(x):
        return x * np.float32(np.pi), jnp.where(x > 0, np.inf, -np.inf), jnp.nan_to_num(x / 0.0)

    check_program(f, randn(3))


def test_batched_matmul_layouts_optimized():
    # Transposes in optimized HLO become copies/bitcasts with non-default layouts.
    def f(x, y):
        return jnp.einsum("abc,cbd->dab", x, y).reshape(-1), (x.transpose(2, 0, 1) + 1).reshape(4, 6)

    check_program(f, randn(2, 3, 4), randn(4, 3, 5), rtol=1e-4, atol=1e-5)


# ----------------------------------------------------------------------------- hand-written HLO

LAYOUT_HLO = """
HloModule layouts
ENTRY main {
  x = f32[2,3]{0,1} parameter(0)
  y = f32[4,6]{1,0} parameter(1)
  xt = f32[3,2]{1,0} bitcast(x)
  t = f32[2,3]{0,1} transpose(xt), dimensions={1,0}
  flat = f32[6]{0} bitcast(t)
  r = f32[2,2,6]{2,1,0} bitcast(y)
  yc = f32[4,6]{0,1} copy(y)
  yb = f32[6,4]{1,0} bitcast(yc)
  ROOT out = (f32[3,2], f32[6], f32[2,2,6], f32[6,4]) tuple(xt, flat, r, yb)
}
"""


def test_bitcast_follows_physical_layout():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    y = np.arange(24, dtype=np.float32).reshape(4, 6)
    xt, flat, r, yb = run_stablehlo(hlo_to_stablehlo(LAYOUT_HLO), [x, y])
    np.testing.assert_array_equal(xt, x.T)              # column-major [2,3] == row-major [3,2]
    np.testing.assert_array_equal(flat, x.T.reshape(-1))  # memory order of a {0,1} array
    np.testing.assert_array_equal(r, y.reshape(2, 2, 6))
    np.testing.assert_array_equal(yb, y.T)              # copy to {0,1} then reinterpret


TILED_HLO = """
HloModule tiled
ENTRY main {
  x = f32[4,4]{1,0:T(2,2)} parameter(0)
  ROOT b = f32[16]{0} bitcast(x)
}
"""


def test_bitcast_of_tiled_layout_follows_tile_order():
    x = np.arange(16, dtype=np.float32).reshape(4, 4)
    (got,) = run_stablehlo(hlo_to_stablehlo(TILED_HLO), [x])
    # 2x2 tiles in row-major tile order, elements row-major inside each tile.
    tiles = x.reshape(2, 2, 2, 2).transpose(0, 2, 1, 3).reshape(-1)
    np.testing.assert_array_equal(got, tiles)


def test_bitcast_reading_tile_padding_works():
    # f32[3,4] in 2x2 tiles fills a 4x4 padded buffer: bitcast to f32[16] reads the padding
    # (any value is right there), and every real element lands where its tile puts it; a
    # bitcast to f32[12] reads the first 12 slots, padding included.
    x = np.arange(12, dtype=np.float32).reshape(3, 4) + 1
    positions = Shape.parse("f32[3,4]{1,0:T(2,2)}").layout.linear_indices()
    for size in (16, 12):
        text = TILED_HLO.replace("f32[4,4]{1,0:T(2,2)}", "f32[3,4]{1,0:T(2,2)}")
        (got,) = run_stablehlo(hlo_to_stablehlo(text.replace("f32[16]", f"f32[{size}]")), [x])
        real = positions < size
        np.testing.assert_array_equal(got[positions[real]], x.reshape(-1)[real])


def test_bitcast_reading_past_the_buffer_is_an_error():
    text = TILED_HLO.replace("f32[4,4]{1,0:T(2,2)} parameter(0)", "f32[2,4]{1,0} parameter(0)")
    text = text.replace("f32[16]{0} bitcast(x)", "f32[3,4]{1,0:T(2,2)} bitcast(x)")
    with pytest.raises(KilnError, match=r"reads past the end of the operand's buffer \(8 -> 16"):
        hlo_to_stablehlo(text, "<t>")


CONST_HLO = """
HloModule constants
ENTRY main {
  p = pred[3] constant({true, false, true})
  s8 = s8[2,2] constant({ { 1, -2 }, { 3, -128 } })
  u = u32[] constant(4294967295)
  f = f32[5] constant({nan, inf, -inf, 1e-05, -0})
  d = f64[] constant(3.141592653589793)
  c = c64[2] constant({(1, 2), (-0.5, 0)})
  re = f32[2] real(c)
  im = f32[2] imag(c)
  ROOT t = (pred[3], s8[2,2], u32[], f32[5], f64[], f32[2], f32[2]) tuple(p, s8, u, f, d, re, im)
}
"""


def test_constant_literals_reach_the_interpreter_exactly():
    p, s8, u, f, d, re, im = run_stablehlo(hlo_to_stablehlo(CONST_HLO), [])
    np.testing.assert_array_equal(p, [True, False, True])
    np.testing.assert_array_equal(s8, [[1, -2], [3, -128]])
    assert int(u) == 4294967295
    assert np.isnan(f[0]) and f[1] == np.inf and f[2] == -np.inf
    assert f[3] == np.float32(1e-05) and f[4] == 0 and np.signbit(f[4])
    assert float(d) == 3.141592653589793
    np.testing.assert_array_equal(re, [1, -0.5])
    np.testing.assert_array_equal(im, [2, 0])


WHILE_HLO = """
HloModule loop, entry_computation_layout={((s32[], f32[3]{0}))->(s32[], f32[3]{0})}
cond {
  p = (s32[], f32[3]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(4)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  p = (s32[], f32[3]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  v = f32[3] get-tuple-element(p), index=1
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  v1 = f32[3] add(v, v)
  ROOT t = (s32[], f32[3]) tuple(i1, v1)
}
ENTRY main {
  init = (s32[], f32[3]) parameter(0)
  ROOT w = (s32[], f32[3]) while(init), condition=cond, body=body
}
"""


def test_entry_tuple_parameter_is_flattened_and_loop_runs():
    mlir = hlo_to_stablehlo(WHILE_HLO)
    assert "func.func @main(%arg0: tensor<i32>" in mlir and "%arg1: tensor<3xf32>" in mlir
    i, v = run_stablehlo(mlir, [np.int32(1), np.array([1, 2, 3], np.float32)])
    assert int(i) == 4
    np.testing.assert_array_equal(v, [8, 16, 24])


def test_is_hlo_text():
    assert is_hlo_text("HloModule m\nENTRY e { ROOT p = f32[] parameter(0) }")
    assert is_hlo_text("  // comment\n/* block */\n HloModule m")
    assert not is_hlo_text("module { func.func @main() { return } }")
    assert not is_hlo_text("")


@pytest.mark.parametrize("text,loc,fragment", [
    ("HloModule m\nENTRY e {\n  ROOT c = f32[9] constant({...})\n}", "<t>:3:28", "elided"),
    ("HloModule m\nENTRY e {\n  x = f32[2] parameter(0)\n  ROOT y = f32[2] bogus(x)\n}",
     "<t>:4:3", "unsupported opcode 'bogus'"),
    ("HloModule m\nENTRY e {\n  ROOT x = f32[2 parameter(0)\n}", "<t>:3:17", "expected ','"),
    ("ENTRY e {}", "<t>:1:1", "expected 'HloModule'"),
    ("HloModule m\nENTRY e {\n  ROOT c = s32[2] constant({1, 2, 3})\n}", "<t>:3:28", "3 values"),
    ("HloModule m\nENTRY e {\n  x = f32[2] parameter(0)\n  ROOT s = f32[1] slice(x), slice={[0:1]}\n"
     "  ROOT s = f32[1] slice(x), slice={[0:1]}\n}", "<t>:5:3", "duplicate instruction"),
])
def test_errors_name_line_and_column(text, loc, fragment):
    with pytest.raises(KilnError) as e:
        hlo_to_stablehlo(text, "<t>")
    assert e.value.location == loc, e.value.one_line()
    assert fragment in e.value.message, e.value.one_line()


def test_cli_prints_one_line_errors(tmp_path, capsys):
    from kiln.cli.translate import main

    bad = tmp_path / "bad.hlo"
    bad.write_text("HloModule m\nENTRY e {\n  ROOT y = f32[2] bogus()\n}\n")
    assert main(["--hlo-to-stablehlo", str(bad)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("kiln-translate: error: ") and err.count("\n") == 1
    assert f"{bad}:3:3" in err and "Traceback" not in err
    good = tmp_path / "good.hlo"
    good.write_text("HloModule m\nENTRY e {\n  ROOT p = f32[2] parameter(0)\n}\n")
    assert main(["--hlo-to-stablehlo", str(good)]) == 0
    assert "func.func @main" in capsys.readouterr().out
    assert main(["--hlo-to-stablehlo", str(tmp_path / "missing.hlo")]) == 1
    assert "cannot read" in capsys.readouterr().err


def test_lit_inputs_import_or_fail_cleanly():
    import pathlib

    root = pathlib.Path(__file__).resolve().parents[1] / "lit" / "hlo"
    files = sorted(root.glob("*.hlo"))
    assert len(files) >= 15
    for f in files:
        text = f.read_text()
        if "RUN: not" in text:
            with pytest.raises(KilnError):
                hlo_to_stablehlo(text, str(f))
        else:
            mlir = hlo_to_stablehlo(text, str(f))
            assert "func.func @main" in mlir, f
            again = hlo_to_stablehlo(stablehlo_to_hlo(mlir))
            assert hlo_to_stablehlo(stablehlo_to_hlo(again)) == again, f


def test_supported_opcode_count():
    for op in ("add", "convolution", "scatter", "while", "fusion", "custom-call", "all-reduce",
               "rng-bit-generator", "batch-norm-grad", "topk", "opt-barrier", "send-done"):
        assert op in SUPPORTED_OPCODES
    assert len(SUPPORTED_OPCODES) >= 110


def test_parse_module_model():
    m = parse_module(WHILE_HLO)
    assert m.name == "loop" and m.entry == "main" and set(m.computations) == {"cond", "body", "main"}
    assert m.entry_computation.root.opcode == "while"
    assert m.computations["body"].root.shape.tuple_shapes[1].dims == [3]


MORE_PROGRAMS = {
    "gelu_layernorm": (lambda x: jax.nn.gelu((x - x.mean(-1, keepdims=True))
                                             / jnp.sqrt(x.var(-1, keepdims=True) + 1e-5),
                                             approximate=False), lambda: [randn(3, 8)]),
    "conv_transpose": (lambda x, w: lax.conv_transpose(x, w, (2, 2), "SAME",
                                                       dimension_numbers=("NHWC", "HWIO", "NHWC")),
                       lambda: [randn(1, 4, 4, 2), randn(3, 3, 2, 3)]),
    "embedding": (lambda t, i: t[i].sum(0), lambda: [randn(10, 4), np.array([1, 3, 3, 9], np.int32)]),
    "segment_sum": (lambda x, s: jax.ops.segment_sum(x, s, num_segments=3),
                    lambda: [randn(5, 2), np.array([0, 2, 1, 2, 0], np.int32)]),
    "vmap_matmul": (jax.vmap(lambda a, b: a @ b), lambda: [randn(3, 2, 4), randn(3, 4, 5)]),
    "argmin_minmax": (lambda x: (jnp.argmin(x, 0), jnp.min(x), jnp.max(x, 1)), lambda: [randn(4, 5)]),
    "while_dynamic_trip_count": (lambda x: lax.while_loop(lambda c: c[0] < 100,
                                                          lambda c: (c[0] * 2 + 1, c[1] + 1), (x, 0)),
                                 lambda: [np.int32(3)]),
    "remat_grad": (jax.grad(jax.checkpoint(lambda x: jnp.sin(x).sum() ** 2)), lambda: [randn(6)]),
    "avg_pool_grad": (jax.grad(lambda x: lax.reduce_window(x, 0., lax.add, (1, 2, 2, 1), (1, 1, 1, 1),
                                                           "SAME").sum()), lambda: [randn(1, 4, 4, 1)]),
    "sort_two_keys": (lambda a, b: lax.sort((a, b), num_keys=2),
                      lambda: [np.array([1, 0, 1, 0], np.int32), randn(4)]),
    "softmax_xent_grad": (jax.grad(lambda w, x: -jax.nn.log_softmax(x @ w)[:, 0].mean()),
                          lambda: [randn(4, 3), randn(2, 4)]),
    "logsumexp": (lambda x: jax.nn.logsumexp(x, axis=0), lambda: [randn(5, 3)]),
    "permutation": (lambda k: jax.random.permutation(jax.random.wrap_key_data(k), 6),
                    lambda: [np.array([1, 2], np.uint32)]),
}


@pytest.mark.parametrize("name", sorted(MORE_PROGRAMS))
def test_more_programs(name):
    f, make_args = MORE_PROGRAMS[name]
    check_program(f, *make_args(), rtol=1e-4, atol=1e-5)


def test_export_errors_are_kiln_errors():
    with pytest.raises(KilnError, match="no func.func @main"):
        stablehlo_to_hlo("func.func @f(%a: tensor<2xf32>) -> tensor<2xf32> { return %a : tensor<2xf32> }")
    with pytest.raises(KilnError, match="not valid MLIR"):
        stablehlo_to_hlo("func.func @main( {")


def test_export_prints_entry_layouts_and_regions():
    hlo = stablehlo_to_hlo(hlo_to_stablehlo(WHILE_HLO))
    assert hlo.startswith("HloModule loop, entry_computation_layout={(s32[], f32[3]{0})->")
    assert "while(" in hlo and "condition=%" in hlo and "body=%" in hlo
    assert hlo_to_stablehlo(hlo) == hlo_to_stablehlo(WHILE_HLO)


def test_large_constants_and_elided_optimized_constants():
    c = np.random.default_rng(1).standard_normal((20, 20)).astype(np.float32)
    i = np.arange(400, dtype=np.int32).reshape(20, 20) * 7 - 1000

    def f(x):
        return x @ c, x.astype(jnp.int32) + i

    x = randn(20, 20)
    # Pre-optimization HLO prints every value; large constants travel as MLIR hex blobs.
    check_program(f, x, optimized=False, rtol=1e-4, atol=1e-4)
    assert '"0x' in hlo_to_stablehlo(jax.jit(f).lower(x).as_text(dialect="hlo"))
    # Optimized dumps elide large constants: a located, explained error.
    with pytest.raises(KilnError, match=r"elided contents") as e:
        hlo_to_stablehlo(jax.jit(f).lower(x).compile().as_text(), "opt.hlo")
    assert e.value.location.startswith("opt.hlo:") and "print_large_constants" in e.value.hint


def test_input_output_alias_is_recorded_and_exported():
    text = """HloModule m, input_output_alias={ {0}: (1, {}, may-alias), {1}: (0, {1}, must-alias) }
ENTRY main {
  a = (f32[2], f32[3]) parameter(0)
  b = f32[2] parameter(1)
  x = f32[2] get-tuple-element(a), index=0
  y = f32[3] get-tuple-element(a), index=1
  s = f32[2] add(x, b)
  ROOT t = (f32[2], f32[3]) tuple(s, y)
}"""
    mlir = hlo_to_stablehlo(text)
    assert '%arg1: tensor<3xf32> {kiln.layout = "{0}", tf.aliasing_output = 1 : i32}' in mlir
    assert '%arg2: tensor<2xf32> {kiln.layout = "{0}", tf.aliasing_output = 0 : i32}' in mlir
    hlo = stablehlo_to_hlo(mlir)
    assert "input_output_alias={ {0}: (2, {}, may-alias), {1}: (1, {}, may-alias) }" in hlo
    assert hlo_to_stablehlo(hlo) == mlir


def test_tuple_shaped_constant_becomes_its_leaves():
    import kiln
    hlo = """HloModule tuple_constant

ENTRY main {
  t = (f32[2], (s32[], pred[2])) constant(({1.5, 2}, (7, {true, false})))
  a = f32[2] get-tuple-element(t), index=0
  inner = (s32[], pred[2]) get-tuple-element(t), index=1
  n = s32[] get-tuple-element(inner), index=0
  p = pred[2] get-tuple-element(inner), index=1
  ROOT r = (f32[2], s32[], pred[2]) tuple(a, n, p)
}
"""
    a, n, p = kiln.compile(hlo)()
    np.testing.assert_array_equal(a, [1.5, 2.0])
    assert n == 7
    np.testing.assert_array_equal(p, [True, False])
    with pytest.raises(KilnError, match=r"has 1 elements, its shape"):
        hlo_to_stablehlo(hlo.replace("({1.5, 2}, (7, {true, false}))", "({1.5, 2})"))


def test_entry_result_layout_is_honoured_in_memory():
    import kiln
    hlo = """HloModule layouts, entry_computation_layout={(f32[2,3]{1,0})->f32[2,3]{0,1}}

ENTRY main {
  p = f32[2,3]{1,0} parameter(0)
  ROOT n = f32[2,3]{0,1} negate(p)
}
"""
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    (y,) = kiln.compile(hlo)(x)
    np.testing.assert_array_equal(y, -x)          # numerics never depend on layouts
    assert y.flags.f_contiguous and not y.flags.c_contiguous  # {0,1}: column-major memory


def test_jax_linear_algebra_hlo_dumps_run_with_typed_ffi_calls():
    """JAX's HLO dumps (before and after XLA's optimizations) write LAPACK calls as
    api_version=API_VERSION_TYPED_FFI with a dictionary backend_config: they run and match JAX."""
    import kiln
    rng = np.random.default_rng(0)
    sq = rng.standard_normal((4, 4)).astype(np.float32)
    spd, sym = sq @ sq.T + 4 * np.eye(4, dtype=np.float32), sq + sq.T
    programs = [
        (jnp.linalg.cholesky, spd), (jnp.linalg.eigh, sym), (jnp.linalg.svd, sq),
        (jnp.linalg.qr, sq), (lambda a: jnp.linalg.solve(a, a[:, :2]), sq),
        (lambda a: lax.linalg.triangular_solve(a, a, left_side=True, lower=True), spd),
        (jnp.linalg.eig, sq), (jax.scipy.linalg.schur, sq), (jax.scipy.linalg.hessenberg, sq),
        (lax.linalg.tridiagonal, sym),
        (lambda a: lax.linalg.tridiagonal_solve(a[0] * 0.1, a[1] + 3, a[2] * 0.1, a), sq)]
    for f, x in programs:
        lowered = jax.jit(f).lower(x)
        want = jax.tree_util.tree_leaves(jax.jit(f)(x))
        for text in (lowered.as_text(dialect="hlo"), lowered.compile().as_text()):
            assert "API_VERSION_TYPED_FFI" in text
            got = kiln.compile(text)(x)
            assert len(got) == len(want)
            for g, w in zip(got, want):
                np.testing.assert_allclose(g, np.asarray(w), rtol=1e-4, atol=1e-4)
