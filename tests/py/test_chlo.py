"""CHLO inputs: converted through jaxlib's MLIR to StableHLO, numerics as XLA's decompositions."""
from __future__ import annotations

import builtins
import re
import sys

import ml_dtypes
import numpy as np
import pytest
from scipy import special

import kiln
from kiln.frontend.chlo import has_chlo

from conftest import shared_file


def chlo_unary(op: str, type_: str) -> str:
    return (f"func.func @main(%x: {type_}) -> {type_} {{\n"
            f"  %0 = {op} %x : {type_} -> {type_}\n  return %0 : {type_}\n}}")


def test_detects_chlo_ops_not_words():
    assert has_chlo('%0 = chlo.erf_inv %x : tensor<f32> -> tensor<f32>')
    assert has_chlo('  %r = "chlo.mulhi"(%a, %b) : (tensor<i8>, tensor<i8>) -> tensor<i8>')
    assert not has_chlo('// uses chlo.erf_inv later\nfunc.func @main() { return }')


def test_erf_inv_matches_scipy_with_edges():
    x = np.array([-0.999, -0.5, -0.0, 0.0, 0.3, 0.9999, 1.0, -1.0, 1.5, np.nan], np.float32)
    (got,) = kiln.compile(chlo_unary("chlo.erf_inv", "tensor<10xf32>"))(x)
    want = special.erfinv(x.astype(np.float64))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, equal_nan=True)
    assert np.signbit(got[2]) and np.isposinf(got[6]) and np.isneginf(got[7])


def test_lgamma_matches_scipy():
    x = np.array([0.5, 1.0, 2.0, 3.7, 10.0, 1e-3, -0.5, -2.5, np.inf, np.nan], np.float32)
    (got,) = kiln.compile(chlo_unary("chlo.lgamma", "tensor<10xf32>"))(x)
    want = special.gammaln(x.astype(np.float64))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, equal_nan=True)


def test_bf16_is_computed_in_f32_like_xla():
    # Evaluated in bf16 the decomposition drifts several ULPs; XLA computes in f32.
    x = np.linspace(-3, 3, 41).astype(ml_dtypes.bfloat16)
    (got,) = kiln.compile(chlo_unary("chlo.asinh", "tensor<41xbf16>"))(x)
    want = np.arcsinh(x.astype(np.float64)).astype(ml_dtypes.bfloat16)
    ulps = np.abs(got.view(np.int16).astype(np.int32) - want.view(np.int16).astype(np.int32))
    assert ulps.max() <= 1, ulps.max()


def test_next_after_stays_bit_exact_in_bf16():
    src = ("func.func @main(%x: tensor<3xbf16>, %y: tensor<3xbf16>) -> tensor<3xbf16> {\n"
           "  %0 = chlo.next_after %x, %y : tensor<3xbf16>, tensor<3xbf16> -> tensor<3xbf16>\n"
           "  return %0 : tensor<3xbf16>\n}")
    x = np.array([1.0, -0.0, 2.0], ml_dtypes.bfloat16)
    y = np.array([2.0, 1.0, 2.0], ml_dtypes.bfloat16)
    (got,) = kiln.compile(src)(x, y)
    bits = x.view(np.uint16).copy()
    want = np.array([bits[0] + 1, 1, bits[2]], np.uint16)
    np.testing.assert_array_equal(got.view(np.uint16), want)


def test_conformance_file_passes_its_check():
    exe = kiln.compile(shared_file("erf_inv_bfloat16_20_20_chlo.mlir"))
    _, outcomes = exe.run_checks()
    assert outcomes and all(o.passed for o in outcomes), outcomes


def test_chlo_syntax_error_is_located():
    with pytest.raises(kiln.KilnError) as err:
        kiln.compile("func.func @main(%x: tensor<f32>) -> tensor<f32> {\n"
                     "  %0 = chlo.erf_inv %x : tensor<f32> -> tensor<f64>\n  return %0 : tensor<f32>\n}",
                     filename="bad.mlir")
    assert re.match(r"bad\.mlir:[23]:\d+: ", str(err.value)), err.value


def test_missing_jax_names_what_to_install(monkeypatch):
    real_import = builtins.__import__

    def no_jax(name, *args, **kwargs):
        if name.startswith(("jax", "jaxlib")):
            raise ImportError(f"No module named '{name}'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_jax)
    for mod in [m for m in sys.modules if m.startswith(("jax", "jaxlib"))]:
        monkeypatch.delitem(sys.modules, mod)
    with pytest.raises(kiln.KilnError) as err:
        # jax is hidden from this process only, so the source must be imported here, not in
        # a compile worker (whose Python has the same packages as the caller's).
        kiln.compile(chlo_unary("chlo.erf_inv", "tensor<2xf32>"), isolate=False)
    assert "pip install jax" in str(err.value) and "CHLO" in str(err.value)


@pytest.mark.parametrize("reverse", [True, False])
def test_scan_honours_is_reverse(reverse, rng):
    # jaxlib's legalization ignores is_reverse; Kiln reverses around a forward scan.
    src = ("func.func @main(%x: tensor<2x5xi32>) -> (tensor<2x5xi32>, tensor<2xi32>) {\n"
           "  %init = stablehlo.constant dense<0> : tensor<2xi32>\n"
           f"  %0:2 = chlo.scan(%x) inits(%init) dimension=1 attributes {{is_reverse = {str(reverse).lower()}}} {{\n"
           "  ^bb0(%a: tensor<2xi32>, %c: tensor<2xi32>):\n"
           "    %1 = stablehlo.add %a, %c : tensor<2xi32>\n"
           "    stablehlo.return %1, %1 : tensor<2xi32>, tensor<2xi32>\n"
           "  } : (tensor<2x5xi32>, tensor<2xi32>) -> (tensor<2x5xi32>, tensor<2xi32>)\n"
           "  return %0#0, %0#1 : tensor<2x5xi32>, tensor<2xi32>\n}")
    x = rng.integers(-50, 50, (2, 5)).astype(np.int32)
    out, carry = kiln.compile(src)(x)
    want = np.cumsum(x[:, ::-1], axis=1)[:, ::-1] if reverse else np.cumsum(x, axis=1)
    np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(carry, x.sum(axis=1))


def test_an_unknown_dialect_beside_chlo_is_refused_before_jaxlib_runs_it():
    # jaxlib's context parses unregistered ops (for Kiln's check ops); anything else is refused
    # with its location before a jaxlib pass sees it.
    src = ("func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {\n"
           "  %0 = chlo.erf %x : tensor<4xf32> -> tensor<4xf32>\n"
           '  %1 = "foo.bar"(%0) : (tensor<4xf32>) -> tensor<4xf32>\n'
           "  return %1 : tensor<4xf32>\n}\n")
    with pytest.raises(kiln.KilnError, match=r"f\.mlir:3:8: 'foo\.bar' is not allowed in an input program"):
        kiln.compile(src, filename="f.mlir")
