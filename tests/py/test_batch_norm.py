"""stablehlo.batch_norm_inference / _training / _grad (lowering/legalize/batch_norm.py): each
against jax.numpy's computation of the same formula (and jax.vjp for the gradient), in f32,
f64, f16 and bf16, with the feature dimension first, in the middle and last; that they fuse
like XLA's expanded form; the reference interpreter agrees; bad input is a located error."""
import ml_dtypes
import numpy as np
import pytest

import kiln
from kiln.reference import evaluate

jax = pytest.importorskip("jax", reason="jax is not installed")
jnp = jax.numpy

ELEMENT = {np.float32: "f32", np.float64: "f64", np.float16: "f16", ml_dtypes.bfloat16: "bf16"}
# Absolute tolerance on values of size ~1 (outputs are normalized): a few ulps of the type for
# the elementwise part; f16/bf16 round once at the end (Kiln computes them in f32).
TOLERANCE = {np.float32: 2e-5, np.float64: 1e-12, np.float16: 4e-3, ml_dtypes.bfloat16: 3e-2}
EPSILON = 1e-3
EPSILON_F32 = float(np.float32(EPSILON))  # the attribute is an f32: f64 programs use this value


def _t(shape, e):
    return "tensor<" + "".join(f"{d}x" for d in shape) + e + ">"


def program(kind: str, shape, feature: int, e: str, epsilon: float = EPSILON) -> str:
    tx, tc = _t(shape, e), _t([shape[feature]], e)
    attrs = f"{{epsilon = {epsilon:e} : f32, feature_index = {feature} : i64}}"
    if kind == "inference":
        return (f"func.func @main(%x: {tx}, %s: {tc}, %o: {tc}, %m: {tc}, %v: {tc}) -> {tx} {{\n"
                f'  %r = "stablehlo.batch_norm_inference"(%x, %s, %o, %m, %v) {attrs} : '
                f"({tx}, {tc}, {tc}, {tc}, {tc}) -> {tx}\n  return %r : {tx}\n}}")
    if kind == "training":
        return (f"func.func @main(%x: {tx}, %s: {tc}, %o: {tc}) -> ({tx}, {tc}, {tc}) {{\n"
                f'  %r:3 = "stablehlo.batch_norm_training"(%x, %s, %o) {attrs} : '
                f"({tx}, {tc}, {tc}) -> ({tx}, {tc}, {tc})\n"
                f"  return %r#0, %r#1, %r#2 : {tx}, {tc}, {tc}\n}}")
    return (f"func.func @main(%x: {tx}, %s: {tc}, %m: {tc}, %v: {tc}, %g: {tx}) -> ({tx}, {tc}, {tc}) {{\n"
            f'  %r:3 = "stablehlo.batch_norm_grad"(%x, %s, %m, %v, %g) {attrs} : '
            f"({tx}, {tc}, {tc}, {tc}, {tx}) -> ({tx}, {tc}, {tc})\n"
            f"  return %r#0, %r#1, %r#2 : {tx}, {tc}, {tc}\n}}")


# -- jax.numpy's batch normalization, computed in f64 from the (rounded) inputs -----------------
def _along(v, shape, feature):
    return jnp.reshape(v, [n if d == feature else 1 for d, n in enumerate(shape)])


def jnp_inference(x, s, o, m, v, feature):
    b = lambda a: _along(a, x.shape, feature)  # noqa: E731
    return (x - b(m)) / jnp.sqrt(b(v) + EPSILON_F32) * b(s) + b(o)


def jnp_training(x, s, o, feature):
    axes = tuple(d for d in range(x.ndim) if d != feature)
    mean, var = jnp.mean(x, axis=axes), jnp.var(x, axis=axes)
    return jnp_inference(x, s, o, mean, var, feature), mean, var


def _inputs(rng, shape, feature, dtype, shift=0.0):
    c = shape[feature]
    x = (rng.standard_normal(shape) * 2 + shift).astype(dtype)
    scale = rng.standard_normal(c).astype(dtype)
    offset = rng.standard_normal(c).astype(dtype)
    return x, scale, offset


def _wide(*arrays):
    return [np.asarray(a, np.float64) for a in arrays]


CASES = [((4, 3, 5), 1), ((6, 8), 0), ((2, 3, 4, 5), 3), ((7,), 0), ((3, 1, 4), 1)]
DTYPES = [np.float32, np.float64, np.float16, ml_dtypes.bfloat16]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: ELEMENT[d])
@pytest.mark.parametrize("shape,feature", CASES)
def test_inference(rng, jax_x64, dtype, shape, feature):
    x, s, o = _inputs(rng, shape, feature, dtype)
    m = rng.standard_normal(shape[feature]).astype(dtype)
    v = (rng.random(shape[feature]) + 0.25).astype(dtype)
    got = kiln.compile(program("inference", shape, feature, ELEMENT[dtype]))(x, s, o, m, v)[0]
    assert got.dtype == dtype and got.shape == shape
    want = jnp_inference(*_wide(x, s, o, m, v), feature)
    np.testing.assert_allclose(got.astype(np.float64), want, atol=TOLERANCE[dtype] * 8,
                               rtol=TOLERANCE[dtype])


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: ELEMENT[d])
@pytest.mark.parametrize("shape,feature", CASES)
def test_training(rng, jax_x64, dtype, shape, feature):
    # A large mean (shift) and small spread: E[x^2] - E[x]^2 would lose the variance here.
    x, s, o = _inputs(rng, shape, feature, dtype, shift=50.0 if dtype == np.float32 else 3.0)
    got = kiln.compile(program("training", shape, feature, ELEMENT[dtype]))(x, s, o)
    want = jnp_training(*_wide(x, s, o), feature)
    for g, w, what in zip(got, want, ("output", "batch_mean", "batch_var")):
        assert g.dtype == dtype, what
        tol = TOLERANCE[dtype] * (50 if what != "output" else 8)  # mean and var are ~50, ~4
        np.testing.assert_allclose(g.astype(np.float64), w, atol=tol, rtol=TOLERANCE[dtype],
                                   err_msg=what)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: ELEMENT[d])
@pytest.mark.parametrize("shape,feature", CASES)
def test_grad_matches_jax_vjp(rng, jax_x64, dtype, shape, feature):
    """batch_norm_grad at the batch statistics is the gradient of batch_norm_training, which
    jax differentiates itself."""
    x, s, o = _inputs(rng, shape, feature, dtype)
    g = rng.standard_normal(shape).astype(dtype)
    xw, sw, ow, gw = _wide(x, s, o, g)
    _, mean, var = jnp_training(xw, sw, ow, feature)
    got = kiln.compile(program("grad", shape, feature, ELEMENT[dtype]))(
        x, s, np.asarray(mean).astype(dtype), np.asarray(var).astype(dtype), g)
    _, vjp = jax.vjp(lambda a, b, c: jnp_training(a, b, c, feature)[0], xw, sw, ow)
    want = vjp(gw)
    # f16/bf16 mean and variance reach the op rounded, which moves the gradients by about
    # that rounding times their size (up to ~N for the per-feature sums).
    n = x.size // shape[feature]
    for got_i, want_i, what, scale in zip(got, want, ("grad_operand", "grad_scale", "grad_offset"),
                                          (4, n, n)):
        assert got_i.dtype == dtype, what
        np.testing.assert_allclose(got_i.astype(np.float64), want_i,
                                   atol=TOLERANCE[dtype] * scale * 4, rtol=TOLERANCE[dtype] * 4,
                                   err_msg=what)


def _spec_oracle():
    """tests/conformance/generate_ops.py: the spec's definitions of batch norm in ops the
    reference interpreter implements (it has no batch norm of its own)."""
    import importlib.util
    from conftest import REPO
    spec = importlib.util.spec_from_file_location(
        "generate_ops", REPO / "tests" / "conformance" / "generate_ops.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module._spec_batch_norm


@pytest.mark.parametrize("kind", ["inference", "training", "grad"])
def test_agrees_with_reference_interpreter(rng, kind):
    shape, feature = (3, 4, 5), 1
    x, s, o = _inputs(rng, shape, feature, np.float32)
    m = rng.standard_normal(4).astype(np.float32)
    v = (rng.random(4) + 0.5).astype(np.float32)
    args = {"inference": [x, s, o, m, v], "training": [x, s, o],
            "grad": [x, s, m, v, rng.standard_normal(shape).astype(np.float32)]}[kind]
    got = kiln.compile(program(kind, shape, feature, "f32"))(*args)
    oracle, count = _spec_oracle()(kind, shape, feature, "f32", EPSILON)
    want = evaluate(oracle, args, [_t(a.shape, "f32") for a in args])
    assert len(got) == len(want) == count
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


def test_inference_fuses_into_one_loop_nest():
    """Like XLA's expansion: the per-feature factor is a small C-vector computation, and the
    whole per-element part is one fused elementwise loop nest."""
    exe = kiln.compile(program("inference", (8, 16, 32, 32), 1, "f32"))
    fused = exe.ir("fuse")
    assert "batch_norm" not in fused
    generics = [l for l in fused.splitlines() if "linalg.generic" in l]
    over_operand = [l for l in generics if "tensor<8x16x32x32xf32>" in l]
    assert len(over_operand) == 1, generics


def test_training_reads_the_operand_in_two_reductions_and_one_elementwise_pass():
    exe = kiln.compile(program("training", (8, 16, 32), 2, "f32"))
    generics = [l for l in exe.ir("fuse").splitlines() if "linalg.generic" in l]
    reductions = [l for l in generics if '"reduction"' in l]
    over_operand = [l for l in generics if "tensor<8x16x32xf32>" in l]
    assert len(reductions) == 2, generics  # the mean, then the centered squares
    assert len(over_operand) == 3, generics  # those two and the normalized output


def test_layer_norm_as_torch_xla_writes_it(rng):
    """torch_xla writes layer norm as batch_norm_training over a [1, rows, features] view with
    feature_index 1, unit scale and zero offset: each row normalized over its features."""
    rows, features = 6, 10
    x = rng.standard_normal((1, rows, features)).astype(np.float32)
    source = program("training", (1, rows, features), 1, "f32", epsilon=1e-5)
    y, mean, var = kiln.compile(source)(x, np.ones(rows, np.float32), np.zeros(rows, np.float32))
    row = x[0]
    want = (row - row.mean(-1, keepdims=True)) / np.sqrt(row.var(-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(y[0], want, atol=1e-5)
    np.testing.assert_allclose(mean, row.mean(-1), atol=1e-6)


def test_empty_batch(jax_x64):
    """No elements per feature: the mean and variance are 0/0 = NaN, as jnp.mean's."""
    args = [np.zeros((0, 3), np.float32), np.ones(3, np.float32), np.zeros(3, np.float32)]
    y, mean, var = kiln.compile(program("training", (0, 3), 1, "f32"))(*args)
    _, want_mean, want_var = jnp_training(*_wide(*args), 1)
    assert y.shape == (0, 3)
    np.testing.assert_array_equal(np.isnan(mean), np.isnan(want_mean))
    np.testing.assert_array_equal(np.isnan(var), np.isnan(want_var))
    assert np.isnan(mean).all()


def test_dynamic_operand_is_a_located_error():
    source = """func.func @main(%x: tensor<?x3xf32>, %s: tensor<3xf32>, %o: tensor<3xf32>) -> tensor<?x3xf32> {
  %r:3 = "stablehlo.batch_norm_training"(%x, %s, %o) {epsilon = 1.0e-3 : f32, feature_index = 1 : i64} : (tensor<?x3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<?x3xf32>, tensor<3xf32>, tensor<3xf32>)
  return %r#0 : tensor<?x3xf32>
}"""
    exe = kiln.compile(source, filename="dyn.mlir")
    with pytest.raises(kiln.KilnError) as info:
        exe.ir("legalize")
    message = str(info.value)
    assert "batch_norm_training" in message and "dyn.mlir:2" in message and "static" in message


def test_pass_runs_alone_with_kiln_opt(tmp_path):
    import subprocess
    import sys
    path = tmp_path / "bn.mlir"
    path.write_text(program("grad", (2, 3), 0, "f32"))
    out = subprocess.run([sys.executable, "-m", "kiln.cli.opt", str(path), "--pass",
                          "kiln-lower-batch-norm"], capture_output=True, text=True, check=True)
    assert "batch_norm" not in out.stdout and "stablehlo.reduce" in out.stdout
