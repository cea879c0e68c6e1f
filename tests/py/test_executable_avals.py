"""Executable.in_avals / out_avals: shape and dtype of every flat argument and result, like
jax.export.Exported.in_avals (for JAX exports: the exported function's flattened avals)."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import kiln

F32 = np.float32

MIXED = """
func.func @main(%x: tensor<2x3xf32>, %n: tensor<i32>, %h: tensor<4xbf16>)
    -> (tensor<3x2xf32>, tensor<i32>, tensor<4xbf16>) {
  %t = stablehlo.transpose %x, dims = [1, 0] : (tensor<2x3xf32>) -> tensor<3x2xf32>
  return %t, %n, %h : tensor<3x2xf32>, tensor<i32>, tensor<4xbf16>
}
"""


def test_avals_of_a_static_module():
    exe = kiln.compile(MIXED)
    assert [a.shape for a in exe.in_avals] == [(2, 3), (), (4,)]
    assert [a.dtype for a in exe.in_avals] == [np.dtype(F32), np.dtype(np.int32),
                                               np.dtype(ml_dtypes.bfloat16)]
    assert [(a.shape, a.dtype) for a in exe.out_avals] == [
        ((3, 2), np.dtype(F32)), ((), np.dtype(np.int32)), ((4,), np.dtype(ml_dtypes.bfloat16))]
    assert isinstance(exe.in_avals, tuple) and exe.in_avals[0].ndim == 2
    assert str(exe.in_avals[0]) == "float32[2,3]"
    # What the avals say is what a call takes and gives.
    args = [np.zeros(a.shape, a.dtype) for a in exe.in_avals]
    outs = exe(*args)
    assert [(o.shape, o.dtype) for o in outs] == [(a.shape, a.dtype) for a in exe.out_avals]


def test_dynamic_dimensions_have_no_size():
    exe = kiln.compile("""
func.func @main(%x: tensor<?x3xf32>) -> tensor<?x3xf32> {
  %y = stablehlo.add %x, %x : tensor<?x3xf32>
  return %y : tensor<?x3xf32>
}""")
    assert [a.shape for a in exe.in_avals] == [(None, 3)]
    assert [a.shape for a in exe.out_avals] == [(None, 3)]
    assert str(exe.in_avals[0]) == "float32[?,3]"


def test_tuple_results_are_flattened():
    exe = kiln.compile("""
HloModule m
ENTRY e {
  p = f32[2] parameter(0)
  c = s32[] constant(7)
  ROOT t = (f32[2], s32[]) tuple(p, c)
}""")
    assert [(a.shape, a.dtype) for a in exe.out_avals] == [((2,), np.dtype(F32)),
                                                           ((), np.dtype(np.int32))]


jax = pytest.importorskip("jax")
pytest.importorskip("flatbuffers", reason="jax's Exported.serialize() needs the flatbuffers package")
from jax import export  # noqa: E402


def test_avals_of_a_jax_export_are_the_flattened_user_avals():
    def f(params, x, unused):
        return {"y": x @ params["w"], "n": (x.shape[0] * 2,)}
    spec = jax.ShapeDtypeStruct(export.symbolic_shape("b, 4"), F32)
    params = {"w": jax.ShapeDtypeStruct((4, 3), F32)}
    exp = export.export(jax.jit(f))(params, spec, jax.ShapeDtypeStruct((5,), np.int8))
    exe = kiln.compile(bytes(exp.serialize()))
    assert [a.shape for a in exe.in_avals] == [(4, 3), ("b", 4), (5,)]
    assert [a.dtype for a in exe.in_avals] == [a.dtype for a in exp.in_avals]
    assert [a.shape for a in exe.out_avals] == [(), ("b", 3)]  # {"n": (2*b,), "y": ...}
    assert [tuple(str(d) for d in a.shape) for a in exe.out_avals] == \
        [tuple(str(d) for d in a.shape) for a in exp.out_avals]
    assert [a.dtype for a in exe.out_avals] == [a.dtype for a in exp.out_avals]
    # The unused argument is still one of the avals: callers pass it.
    got = exe({"w": np.ones((4, 3), F32)}, np.ones((2, 4), F32), np.zeros(5, np.int8))
    np.testing.assert_array_equal(got["y"], np.full((2, 3), 4, F32))
