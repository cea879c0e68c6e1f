"""Large elementwise loop nests run on all cores (kiln.lowering.codegen.parallel): results are
bit-identical to the serial code, for broadcasts, transposes, in-place updates, odd extents."""
import numpy as np
import pytest

import kiln
from kiln.lowering.codegen import parallel


def both(src):
    """(parallel, serial) compilations of the same program, and the serial one's codegen IR."""
    par = kiln.compile(src)
    old = parallel.MIN_ITERATIONS
    parallel.MIN_ITERATIONS = 1 << 62
    try:
        ser = kiln.compile(src)
        ser_ir = ser.ir("codegen")
    finally:
        parallel.MIN_ITERATIONS = old
    return par, ser, ser_ir


PROGRAMS = {
    # bias add + tanh: a broadcast operand that the split dimension does not index
    "broadcast": ("""
func.func @main(%x: tensor<1024x512xf32>, %b: tensor<512xf32>) -> tensor<1024x512xf32> {
  %0 = stablehlo.broadcast_in_dim %b, dims = [1] : (tensor<512xf32>) -> tensor<1024x512xf32>
  %1 = stablehlo.add %x, %0 : tensor<1024x512xf32>
  %2 = stablehlo.tanh %1 : tensor<1024x512xf32>
  return %2 : tensor<1024x512xf32>
}""", [(1024, 512), (512,)], lambda x, b: np.tanh(x + b)),
    # a transpose: the split dimension is the inner one of the input
    "transpose": ("""
func.func @main(%x: tensor<640x768xf32>) -> tensor<768x640xf32> {
  %0 = stablehlo.transpose %x, dims = [1, 0] : (tensor<640x768xf32>) -> tensor<768x640xf32>
  %1 = stablehlo.exponential %0 : tensor<768x640xf32>
  return %1 : tensor<768x640xf32>
}""", [(640, 768)], lambda x: np.exp(x.T)),
    # extent 3 on the split dimension: chunks of unequal size
    "odd_extent": ("""
func.func @main(%x: tensor<3x100003xf32>, %y: tensor<3x100003xf32>) -> tensor<3x100003xf32> {
  %0 = stablehlo.multiply %x, %y : tensor<3x100003xf32>
  %1 = stablehlo.subtract %0, %x : tensor<3x100003xf32>
  return %1 : tensor<3x100003xf32>
}""", [(3, 100003), (3, 100003)], lambda x, y: x * y - x),
    # f64 and i32 element types
    "int_and_f64": ("""
func.func @main(%x: tensor<600x500xi32>, %y: tensor<600x500xf64>) -> (tensor<600x500xi32>, tensor<600x500xf64>) {
  %0 = stablehlo.multiply %x, %x : tensor<600x500xi32>
  %1 = stablehlo.sqrt %y : tensor<600x500xf64>
  return %0, %1 : tensor<600x500xi32>, tensor<600x500xf64>
}""", [(600, 500, "i4"), (600, 500, "f8")], None),
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_parallel_matches_serial_bit_for_bit(name, rng):
    src, shapes, ref = PROGRAMS[name]
    par, ser, ser_ir = both(src)
    assert "kiln_parallel_for" in par.ir("codegen")
    assert "kiln_parallel_for" not in ser_ir
    args = []
    for s in shapes:
        if isinstance(s[-1], str):
            dt = np.dtype(s[-1])
            a = (rng.integers(-2**31, 2**31 - 1, s[:-1]).astype(dt) if dt.kind == "i"
                 else np.abs(rng.standard_normal(s[:-1])).astype(dt))
        else:
            a = rng.standard_normal(s).astype(np.float32)
        args.append(a)
    if args[0].dtype == np.float32:
        args[0].flat[7] = np.nan
        args[0].flat[-1] = -np.inf
    got, want = par(*args), ser(*args)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)          # NaN positions included
    if ref is not None:
        with np.errstate(invalid="ignore"):
            np.testing.assert_allclose(got[0], ref(*args), rtol=2e-6, atol=1e-6)


def test_small_ops_stay_serial_and_row_reductions_split_rows():
    src = """
func.func @main(%x: tensor<1024x1024xf32>, %s: tensor<64xf32>) -> (tensor<1024xf32>, tensor<64xf32>) {
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %0 = stablehlo.reduce(%x init: %z) applies stablehlo.add across dimensions = [1] : (tensor<1024x1024xf32>, tensor<f32>) -> tensor<1024xf32>
  %1 = stablehlo.exponential %s : tensor<64xf32>
  return %0, %1 : tensor<1024xf32>, tensor<64xf32>
}"""
    # The row reduction is split over its rows (kiln-parallelize: reductions too, since the
    # loop strategy of test_codegen_vectorize.py); the 64-element exp stays serial.
    exe = kiln.compile(src)
    assert exe.ir("codegen").count("call @kiln_parallel_for") == 1
    x, s = np.random.default_rng(3).standard_normal((1024, 1024)).astype(np.float32), \
        np.linspace(-2, 2, 64, dtype=np.float32)
    rows, small = exe(x, s)
    np.testing.assert_allclose(rows, x.astype(np.float64).sum(1), rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(small, np.exp(s), rtol=1e-6)


# A while loop whose body works on a large array (threefry's rounds, an iterative solver's
# step): the body's ops are outlined too, their ctx in the entry block, so that many
# iterations do not grow the stack.
LOOP = """
func.func @main(%x: tensor<512x1024xf32>, %n: tensor<i32>) -> tensor<512x1024xf32> {
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %c1 = stablehlo.constant dense<1> : tensor<i32>
  %half = stablehlo.constant dense<0.5> : tensor<512x1024xf32>
  %r:2 = stablehlo.while(%i = %c0, %acc = %x) : tensor<i32>, tensor<512x1024xf32>
   cond {
    %lt = stablehlo.compare LT, %i, %n : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %lt : tensor<i1>
  } do {
    %next = stablehlo.add %i, %c1 : tensor<i32>
    %s = stablehlo.sine %acc : tensor<512x1024xf32>
    %m = stablehlo.multiply %s, %half : tensor<512x1024xf32>
    %a = stablehlo.add %m, %acc : tensor<512x1024xf32>
    stablehlo.return %next, %a : tensor<i32>, tensor<512x1024xf32>
  }
  return %r#1 : tensor<512x1024xf32>
}"""


def test_loop_bodies_are_outlined_and_match_serial(rng, monkeypatch):
    monkeypatch.setenv("KILN_COMPILE_IN_PROCESS", "1")
    monkeypatch.setenv("KILN_CACHE", "0")
    par, ser, ser_ir = both(LOOP)
    par_ir = par.ir("codegen")
    loop = par_ir[par_ir.index("scf.while"):]
    body = loop[:loop.index("\n    return")]
    assert "kiln_parallel_for" in body and "memref.alloca" not in body
    assert "kiln_parallel_for" not in ser_ir
    x = rng.standard_normal((512, 1024)).astype(np.float32)
    # 3,000 iterations: an alloca per iteration would take 3,000 ctx slots of stack
    n = np.array(3000, np.int32)
    (got,), (want,) = par(x, n), ser(x, n)
    np.testing.assert_array_equal(got, want)
    expect = x.astype(np.float64)
    for _ in range(3):
        expect = np.sin(expect) * 0.5 + expect
    (three,) = par(x, np.array(3, np.int32))
    np.testing.assert_allclose(three, expect, rtol=1e-5, atol=1e-5)
