"""Loading serialized `jax.export.Exported` artifacts (kiln/frontend/jax_export.py): format
detection, the calling convention (kept arguments, platform index, effect tokens, dimension
arguments, shape assertions), pytrees, shape polymorphism, version skew and the CLI."""
from __future__ import annotations

import collections
import dataclasses
import sys

import numpy as np
import pytest

import kiln
from kiln.cli.main import main as kiln_main
from kiln.frontend.detect import Format, detect

jax = pytest.importorskip("jax")
pytest.importorskip("flatbuffers", reason="jax's Exported.serialize() needs the flatbuffers package")
import jax.numpy as jnp  # noqa: E402
from jax import export  # noqa: E402
from torch_mlir import ir  # noqa: E402
from torch_mlir._mlir_libs import _stablehlo  # noqa: E402

F32 = np.float32


def serialized(fn, *args, **kwargs) -> bytes:
    platforms = kwargs.pop("platforms", None)
    return bytes(export.export(jax.jit(fn), platforms=platforms)(*args, **kwargs).serialize())


def counting(exe):
    """Count the specialisations `exe` compiles."""
    calls = []
    compile_ = exe._compile

    def wrapped(shapes):
        calls.append(shapes)
        return compile_(shapes)
    exe._compile = wrapped
    return calls


def test_exported_is_told_from_its_content():
    exp = export.export(jax.jit(jnp.sin))(np.ones(3, F32))
    assert detect(bytes(exp.serialize())) is Format.JAX_EXPORTED
    assert detect(exp.mlir_module_serialized) is Format.MLIR_BYTECODE
    assert detect(b"\x10\x00\x00\x00" + bytes(60)) is Format.MLIR_TEXT  # flatbuffer-ish, no MLIR


def test_pytrees_in_and_out_are_restored(rng):
    def f(params, x, *, scale):
        return {"y": jnp.tanh(x @ params["w"] + params["b"]) * scale, "aux": (x.sum(), None)}
    params = {"w": rng.standard_normal((4, 3)).astype(F32), "b": rng.standard_normal(3).astype(F32)}
    x = rng.standard_normal((2, 4)).astype(F32)
    exe = kiln.compile(serialized(f, params, x, scale=F32(2)))
    got = exe(params, x, scale=F32(0.5))
    want = f(params, x, scale=F32(0.5))
    assert set(got) == {"y", "aux"} and got["aux"][1] is None
    np.testing.assert_allclose(got["y"], want["y"], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(got["aux"][0], want["aux"][0], rtol=1e-6)
    flat = exe.flat(params["b"], params["w"], x, F32(0.5))  # jax's leaf order: dict keys sorted
    np.testing.assert_allclose(flat[1], want["y"], rtol=1e-6, atol=1e-6)
    with pytest.raises(kiln.KilnError, match=r"keys \['b', 'w'\]"):
        exe({"w": params["w"]}, x, scale=F32(1))


Point = collections.namedtuple("Point", "x y")
export.register_namedtuple_serialization(Point, serialized_name="kiln_tests.Point")


def test_custom_pytree_nodes_use_jax_registry():
    f = lambda p: Point(p.y * 2, p.x + 1)  # noqa: E731
    exe = kiln.compile(serialized(f, Point(np.ones(2, F32), np.zeros(3, F32))))
    got = exe(Point(np.arange(2, dtype=F32), np.arange(3, dtype=F32)))
    assert isinstance(got, Point)
    np.testing.assert_array_equal(got.x, [0, 2, 4])
    np.testing.assert_array_equal(got.y, [1, 2])


def test_loading_needs_no_jax(monkeypatch):
    data = serialized(lambda x, y: (x * y, x), np.ones(3, F32), np.ones(3, F32))
    monkeypatch.setitem(sys.modules, "jax", None)  # `import jax` now fails
    exe = kiln.compile(data)
    out = exe(np.arange(3, dtype=F32), np.full(3, 2, F32))
    np.testing.assert_array_equal(out[0], [0, 2, 4])
    with pytest.raises(kiln.KilnError, match="needs jax"):
        kiln.jit(jnp.sin)(np.ones(2, F32))


def test_custom_node_without_jax_names_jax(monkeypatch):
    data = serialized(lambda p: p.x, Point(np.ones(2, F32), np.zeros(3, F32)))
    exe = kiln.compile(data)
    monkeypatch.setitem(sys.modules, "jax", None)
    monkeypatch.setitem(sys.modules, "jax._src.export", None)
    with pytest.raises(kiln.KilnError, match="needs jax"):
        exe(Point(np.ones(2, F32), np.zeros(3, F32)))
    np.testing.assert_array_equal(exe.flat(np.ones(2, F32), np.zeros(3, F32))[0], [1, 1])


def test_unused_arguments_are_accepted_and_dropped():
    f = lambda x, unused, y: x - y  # noqa: E731
    exp = export.export(jax.jit(f))(np.ones(3, F32), np.ones((2, 2), np.int32), np.ones(3, F32))
    assert exp.module_kept_var_idx == (0, 2)
    exe = kiln.compile(bytes(exp.serialize()))
    assert [s.shape for s in exe.arg_specs] == [(3,), (2, 2), (3,)]
    out = exe(np.full(3, 5, F32), np.zeros((2, 2), np.int32), np.arange(3, dtype=F32))
    np.testing.assert_array_equal(out, [5, 4, 3])


def test_the_raw_module_runs_too():
    exp = export.export(jax.jit(lambda x: jnp.cos(x) * 3))(np.ones(4, F32))
    (out,) = kiln.compile(exp.mlir_module_serialized)(np.arange(4, dtype=F32))
    np.testing.assert_allclose(out, np.cos(np.arange(4, dtype=F32)) * 3, rtol=1e-6)


def test_raw_modules_keep_jax_conventions_where_they_can():
    spec = jax.ShapeDtypeStruct(export.symbolic_shape("b, 4"), F32)
    poly = export.export(jax.jit(lambda x: jnp.sum(x, axis=0) * x.shape[0]))(spec)
    exe = kiln.compile(poly.mlir_module_serialized)  # shape_assertion runs as a check
    (out,) = exe(np.ones((3, 4), F32))  # a plain Executable: a tuple of results
    np.testing.assert_array_equal(out, np.full(4, 9, F32))
    multi = export.export(jax.jit(jnp.sin), platforms=("cpu", "cuda"))(np.ones(2, F32))
    with pytest.raises(kiln.KilnError, match="several platforms.*load exp.serialize"):
        kiln.compile(multi.mlir_module_serialized)
    tokens = _artifact("module attributes {jax.uses_shape_polymorphism = false} {\n"
                       + _TOKENS_MAIN.replace('%p: tensor<i32> {jax.global_constant = "_platform_index"},',
                                              "").replace("%is_cpu = stablehlo.compare EQ, %p, %one",
                                                          "%is_cpu = stablehlo.compare EQ, %one, %one")
                       + "}")
    np.testing.assert_array_equal(kiln.compile(tokens)(np.arange(3, dtype=F32))[0], [0, 2, 4])


def test_shardy_annotations_need_jaxlib(monkeypatch, tmp_path):
    """JAX puts `sdy.sharding_rule` on custom calls; only jaxlib can deserialize it."""
    exp = export.export(jax.jit(jnp.linalg.cholesky))(np.eye(2, dtype=F32))
    assert b"sdy" in exp.mlir_module_serialized
    a = np.array([[4.0, 2.0], [2.0, 3.0]], F32)
    np.testing.assert_allclose(kiln.compile(exp.mlir_module_serialized)(a)[0], np.linalg.cholesky(a),
                               rtol=1e-6)
    assert "sdy." not in str(kiln.load(_write(exp, tmp_path)))
    # Binary inputs are read in Kiln's reader process (frontend/untrusted.py), where jax is
    # installed; the reader itself, run here without jax, names what is missing.
    from kiln.context import make_context
    from kiln.frontend.untrusted import binary_reader
    from kiln.frontend.detect import Format
    monkeypatch.setitem(sys.modules, "jax._src.interpreters", None)
    with pytest.raises(kiln.KilnError, match="Shardy.*jax is not installed"):
        binary_reader(Format.JAX_EXPORTED, "f.jax")(bytes(exp.serialize()), make_context())


def test_multi_platform_export_runs_its_cpu_branch(tmp_path):
    f = lambda x: jnp.sin(x) + 1  # noqa: E731
    exp = export.export(jax.jit(f), platforms=("cuda", "cpu"))(np.ones(3, F32))
    exe = kiln.compile(bytes(exp.serialize()))
    assert "stablehlo.constant dense<1> : tensor<i32>" in str(kiln.load(_write(exp, tmp_path)))  # 'cpu' is 1
    x = np.linspace(0, 1, 3, dtype=F32)
    np.testing.assert_allclose(exe(x), np.sin(x) + 1, rtol=1e-6)


class _TestOrderedEffect(jax._src.effects.Effect):
    """An effect with a nullary constructor, as jax's serializer requires."""
    __eq__ = lambda self, other: type(self) is type(other)  # noqa: E731
    __hash__ = lambda self: hash(type(self))  # noqa: E731


_TOKENS_MAIN = """
func.func public @main(%p: tensor<i32> {jax.global_constant = "_platform_index"},
                       %t: !stablehlo.token, %x: tensor<3xf32>)
    -> (!stablehlo.token, tensor<3xf32> {jax.result_info = "result"}) {
  %one = stablehlo.constant dense<1> : tensor<i32>
  %is_cpu = stablehlo.compare EQ, %p, %one : (tensor<i32>, tensor<i32>) -> tensor<i1>
  %c2 = stablehlo.constant dense<2.0> : tensor<3xf32>
  %c100 = stablehlo.constant dense<100.0> : tensor<3xf32>
  %scale = stablehlo.select %is_cpu, %c2, %c100 : tensor<i1>, tensor<3xf32>
  %y = stablehlo.multiply %x, %scale : tensor<3xf32>
  %t2 = stablehlo.after_all %t : !stablehlo.token
  return %t2, %y : !stablehlo.token, tensor<3xf32>
}
"""


def _artifact(text: str) -> bytes:
    from kiln.context import make_context
    with make_context():
        module = ir.Module.parse(text)
        return _stablehlo.serialize_portable_artifact(module, _stablehlo.get_current_version())


def test_platform_index_and_effect_tokens(tmp_path):
    """@main(platform_index, token, x) -> (token, y), as JAX lowers a function with one ordered
    effect for two platforms: Kiln passes index 1 ('cpu') and a fresh token, drops the token."""
    base = export.export(jax.jit(lambda x: x), platforms=("cuda", "cpu"))(np.ones(3, F32))
    exp = dataclasses.replace(base, mlir_module_serialized=_artifact(_TOKENS_MAIN),
                              ordered_effects=(_TestOrderedEffect(),))
    exe = kiln.compile(bytes(exp.serialize()))
    assert exe.convention.ordered_effects and len(exe.arg_specs) == 1
    assert exe.convention.platform_index == 1
    np.testing.assert_array_equal(exe(np.arange(3, dtype=F32)), [0, 2, 4])
    text = str(kiln.load(_write(exp, tmp_path)))
    assert "stablehlo.after_all" in text and "call @kiln_jax_main" in text


_DIM_ARG_MAIN = """
func.func public @main(%b: tensor<i64> {jax.global_constant = "b"}, %x: tensor<?x2xf32>)
    -> (tensor<?x2xf32> {jax.result_info = "result"}) {
  %b32 = stablehlo.convert %b : (tensor<i64>) -> tensor<f32>
  %s = stablehlo.broadcast_in_dim %b32, dims = [] : (tensor<f32>) -> tensor<1x2xf32>
  %n = stablehlo.get_dimension_size %x, dim = 0 : (tensor<?x2xf32>) -> tensor<i32>
  %shape = stablehlo.reshape %n : (tensor<i32>) -> tensor<1xi32>
  %two = stablehlo.constant dense<2> : tensor<1xi32>
  %shape2 = stablehlo.concatenate %shape, %two, dim = 0 : (tensor<1xi32>, tensor<1xi32>) -> tensor<2xi32>
  %sb = stablehlo.dynamic_broadcast_in_dim %b32, %shape2, dims = [] : (tensor<f32>, tensor<2xi32>) -> tensor<?x2xf32>
  %y = stablehlo.multiply %x, %sb : tensor<?x2xf32>
  return %y : tensor<?x2xf32>
}
"""


def test_dimension_arguments_come_from_the_argument_shapes():
    spec = jax.ShapeDtypeStruct(export.symbolic_shape("b, 2"), F32)
    base = export.export(jax.jit(lambda x: x))(spec)
    exp = dataclasses.replace(base, mlir_module_serialized=_artifact(_DIM_ARG_MAIN))
    exe = kiln.compile(bytes(exp.serialize()))
    for b in (3, 5):
        x = np.ones((b, 2), F32)
        np.testing.assert_array_equal(exe(x), x * b)


def test_shape_polymorphic_export_compiles_once_per_shape(rng):
    spec = jax.ShapeDtypeStruct(export.symbolic_shape("b, 16"), F32)
    f = lambda x: jnp.tanh(x).sum(0) * x.shape[0] + jnp.mean(x)  # noqa: E731
    exe = kiln.compile(serialized(f, spec))
    compiles = counting(exe)
    for b in (2, 7, 2, 7, 7):
        x = rng.standard_normal((b, 16)).astype(F32)
        np.testing.assert_allclose(exe(x), f(x), rtol=1e-5, atol=1e-5)
    assert compiles == [((2, 16),), ((7, 16),)]


def test_leading_integer_arguments_are_not_dimension_variables():
    """A user's scalar int before a dynamic array is data, not a dimension argument."""
    spec = jax.ShapeDtypeStruct(export.symbolic_shape("b, 4"), F32)
    f = lambda n, x: x * n + x.shape[0]  # noqa: E731
    exp = export.export(jax.jit(f))(jax.ShapeDtypeStruct((), np.int32), spec)
    x = np.ones((3, 4), F32)
    np.testing.assert_array_equal(kiln.compile(bytes(exp.serialize()))(np.int32(10), x), f(10, x))
    (raw,) = kiln.compile(exp.mlir_module_serialized)(np.int32(10), x)
    np.testing.assert_array_equal(raw, f(10, x))


def test_shapes_must_fit_the_symbolic_shapes():
    xs = export.symbolic_shape("b, 3")
    ys = export.symbolic_shape("b, 2*b", scope=xs[0].scope)
    f = lambda x, y: x.sum() + y.sum()  # noqa: E731
    exe = kiln.compile(serialized(f, jax.ShapeDtypeStruct(xs, F32), jax.ShapeDtypeStruct(ys, F32)))
    np.testing.assert_allclose(exe(np.ones((3, 3), F32), np.ones((3, 6), F32)), 27)
    with pytest.raises(kiln.KilnError, match="'b' is 3"):
        exe(np.ones((3, 3), F32), np.ones((4, 8), F32))
    with pytest.raises(kiln.KilnError, match="2\\*b = 6, got 7"):
        exe(np.ones((3, 3), F32), np.ones((3, 7), F32))
    with pytest.raises(kiln.KilnError, match="must be >= 1"):
        exe(np.ones((0, 3), F32), np.ones((0, 0), F32))


def test_dimension_expressions_are_evaluated_without_eval():
    from kiln.driver.calling import eval_dim
    env = {"b": 6, "c": 4}
    assert eval_dim("2*b + 1", env) == 13
    assert eval_dim("floordiv(b, 4) + mod(b, 4)", env) == 3
    assert eval_dim("max(b, c) - min(b, c)", env) == 2
    assert eval_dim("non_negative(c - b)", env) == 0
    assert eval_dim("-1*b + 7", env) == 1
    for bad in ("__import__('os')", "b.__class__", "d + 1", "b ** 2", "floordiv(b, 0)", "b +"):
        with pytest.raises(ValueError):
            eval_dim(bad, env)


def _with_producer(data: bytes, old: bytes, new: bytes) -> bytes:
    assert len(old) == len(new) and data.count(old) == 1
    return data.replace(old, new)


@pytest.mark.parametrize("which", ["newer", "older"])
def test_version_skew_names_both_versions(which):
    exp = export.export(jax.jit(jnp.sin))(np.ones(3, F32))
    data = bytes(exp.serialize())
    import re
    found = re.search(rb"StableHLO_v(\d+)\.(\d+)\.(\d+)", data)
    old = found.group(0)
    new = (b"StableHLO_v9" if which == "newer" else b"StableHLO_v0") + old[len(b"StableHLO_v1"):]
    if which == "older":
        new = b"StableHLO_v0." + b"0" * len(found.group(2)) + b"." + b"1" * len(found.group(3))
    with pytest.raises(kiln.KilnError) as info:
        kiln.compile(_with_producer(data, old, new))
    text = str(info.value)
    lo, hi = _stablehlo.get_minimum_version(), _stablehlo.get_current_version()
    written = ".".join(str(int(g)) for g in re.search(rb"v(\d+)\.(\d+)\.(\d+)", new).groups())
    assert "jax.export.Exported" in text and f"written by StableHLO {written};" in text
    assert lo in text and hi in text and "re-export" in text


def test_unsupported_calling_convention_and_platform_are_clear():
    exp = export.export(jax.jit(jnp.sin))(np.ones(3, F32))
    with pytest.raises(kiln.KilnError, match="calling convention version 8; Kiln reads versions 9 to 10"):
        kiln.compile(bytes(dataclasses.replace(exp, calling_convention_version=8).serialize()))
    with pytest.raises(kiln.KilnError, match="lowered for tpu only"):
        kiln.compile(bytes(dataclasses.replace(exp, platforms=("tpu",)).serialize()))


def test_truncated_exported_is_a_clear_error():
    data = serialized(jnp.sin, np.ones(3, F32))
    with pytest.raises(kiln.KilnError):
        kiln.compile(data[: len(data) // 2])


def _write(exp, directory):
    path = directory / "exported.jax"
    path.write_bytes(bytes(exp.serialize()))
    return path


def test_kiln_run_reads_an_exported(tmp_path, capsys):
    f = lambda x, y: {"s": jnp.sin(x) * y, "t": (x + y,)}  # noqa: E731
    x, y = np.linspace(0, 1, 4, dtype=F32), np.full(4, 3, F32)
    src = tmp_path / "model.jax"
    src.write_bytes(serialized(f, x, y))
    np.savez(tmp_path / "in.npz", x, y)
    rc = kiln_main(["run", str(src), "--inputs", str(tmp_path / "in.npz"),
                    "--output", str(tmp_path / "out.npz")])
    assert rc == 0, capsys.readouterr().err
    with np.load(tmp_path / "out.npz") as out:
        np.testing.assert_allclose(out["arr_0"], np.sin(x) * y, rtol=1e-6)
        np.testing.assert_allclose(out["arr_1"], x + y, rtol=1e-6)
