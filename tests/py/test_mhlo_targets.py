"""The `mhlo.*` custom calls torch_xla and TensorFlow write for MHLO ops StableHLO lacks
(lowering/legalize/mhlo_targets.py): each against numpy/scipy in f32, f64, f16 and bf16;
mhlo.topk against a stable argsort; GELU as torch_xla writes it fuses; bad calls are located
errors and unknown targets keep their error."""
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest
import scipy.special

import kiln
from kiln.lowering.input_allowlist import MHLO_OP_CALLS
from kiln.lowering.legalize.mhlo_targets import TARGETS

ELEMENT = {np.float32: "f32", np.float64: "f64", np.float16: "f16", ml_dtypes.bfloat16: "bf16"}
TOLERANCE = {np.float32: 2e-6, np.float64: 1e-14, np.float16: 1e-3, ml_dtypes.bfloat16: 8e-3}
FUNCTIONS = {  # target -> (numpy reference, the domain inputs are drawn from)
    "erf": (scipy.special.erf, (-4, 4)), "acos": (np.arccos, (-1, 1)),
    "acosh": (np.arccosh, (1, 20)), "asin": (np.arcsin, (-1, 1)), "asinh": (np.arcsinh, (-20, 20)),
    "atanh": (np.arctanh, (-0.99, 0.99)), "cosh": (np.cosh, (-8, 8)), "sinh": (np.sinh, (-8, 8)),
    "tan": (np.tan, (-1.5, 1.5)),
}


def _t(shape, e):
    return "tensor<" + "".join(f"{d}x" for d in shape) + e + ">"


def call(target: str, operand: str, results: list[str], attributes: str = "{}") -> str:
    out = results[0] if len(results) == 1 else f"({', '.join(results)})"
    n = len(results)
    values = "%0" if n == 1 else ", ".join(f"%0#{i}" for i in range(n))
    return (f"func.func @main(%x: {operand}) -> {out} {{\n"
            f"  %0{'' if n == 1 else f':{n}'} = stablehlo.custom_call @{target}(%x) "
            f"{{mhlo.attributes = {attributes}, mhlo.version = 1 : i64}} : ({operand}) -> {out}\n"
            f"  return {values} : {', '.join(results)}\n}}")


def test_the_input_check_keeps_the_attributes_of_every_target():
    assert {c.split("@")[1] for c in MHLO_OP_CALLS} == set(TARGETS)


@pytest.mark.parametrize("dtype", list(ELEMENT), ids=lambda d: ELEMENT[d])
@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_elementwise_target(rng, name, dtype):
    reference, (lo, hi) = FUNCTIONS[name]
    x = rng.uniform(lo, hi, (5, 7)).astype(dtype)
    t = _t(x.shape, ELEMENT[dtype])
    got = kiln.compile(call(f"mhlo.{name}", t, [t]))(x)[0]
    assert got.dtype == dtype
    want = reference(x.astype(np.float64))
    # the result type's rounding of the exact value, plus libm's few ulps
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=TOLERANCE[dtype],
                               atol=TOLERANCE[dtype])


def test_tan_of_complex(rng):
    z = (rng.standard_normal(6) + 1j * rng.standard_normal(6)).astype(np.complex64)
    t = _t(z.shape, "complex<f32>")
    got = kiln.compile(call("mhlo.tan", t, [t]))(z)[0]
    np.testing.assert_allclose(got, np.tan(z.astype(np.complex128)), rtol=1e-5)


@pytest.mark.parametrize("dtype,element", [(np.float32, "f32"), (np.int32, "i32"),
                                           (ml_dtypes.bfloat16, "bf16"), (np.uint8, "ui8")])
def test_top_k(rng, dtype, element):
    x = rng.integers(0, 6, (4, 9)).astype(dtype)  # many ties: the lower index comes first
    k = 4
    values, indices = kiln.compile(call("mhlo.topk", _t(x.shape, element),
                                        [_t((4, k), element), _t((4, k), "i32")],
                                        f"{{k = {k} : i64, largest = true}}"))(x)
    order = np.argsort(-x.astype(np.float64), axis=-1, kind="stable")[:, :k]
    np.testing.assert_array_equal(indices, order)
    np.testing.assert_array_equal(values, np.take_along_axis(x, order, -1))


def test_top_k_puts_nan_first_and_k_zero():
    x = np.array([[1.0, np.nan, 3.0, -np.inf]], np.float32)
    values, indices = kiln.compile(call("mhlo.topk", _t(x.shape, "f32"),
                                        [_t((1, 2), "f32"), _t((1, 2), "i32")],
                                        "{k = 2 : i64}"))(x)
    assert np.isnan(values[0, 0]) and values[0, 1] == 3.0
    np.testing.assert_array_equal(indices, [[1, 2]])


def test_gelu_as_torch_xla_writes_it_fuses(rng):
    """torch_xla's exact GELU: x/2 * (1 + erf(x/sqrt 2)); the erf joins the elementwise loop."""
    source = """func.func @main(%x: tensor<64x128xf32>) -> tensor<64x128xf32> {
  %half = stablehlo.constant dense<0.5> : tensor<64x128xf32>
  %one = stablehlo.constant dense<1.0> : tensor<64x128xf32>
  %r2 = stablehlo.constant dense<0.707106769> : tensor<64x128xf32>
  %a = stablehlo.multiply %x, %half : tensor<64x128xf32>
  %b = stablehlo.multiply %x, %r2 : tensor<64x128xf32>
  %e = stablehlo.custom_call @mhlo.erf(%b) {mhlo.attributes = {}, mhlo.version = 1 : i64} : (tensor<64x128xf32>) -> tensor<64x128xf32>
  %c = stablehlo.add %e, %one : tensor<64x128xf32>
  %y = stablehlo.multiply %a, %c : tensor<64x128xf32>
  return %y : tensor<64x128xf32>
}"""
    exe = kiln.compile(source)
    generics = [l for l in exe.ir("fuse").splitlines() if "linalg.generic" in l]
    assert len(generics) == 1, generics
    x = rng.standard_normal((64, 128)).astype(np.float32)
    want = x / 2 * (1 + scipy.special.erf(x.astype(np.float64) / np.sqrt(2)))
    np.testing.assert_allclose(exe(x)[0], want, rtol=1e-5, atol=1e-6)


def _error(source: str) -> str:
    with pytest.raises(kiln.KilnError) as info:
        kiln.compile(source, filename="m.mlir")
    return str(info.value)


def test_top_k_smallest_is_a_located_error():
    message = _error(call("mhlo.topk", "tensor<8xf32>", ["tensor<2xf32>", "tensor<2xi32>"],
                          "{k = 2 : i64, largest = false}"))
    assert "m.mlir:2" in message and "largest = false" in message


def test_top_k_without_k_is_a_located_error():
    message = _error(call("mhlo.topk", "tensor<8xf32>", ["tensor<2xf32>", "tensor<2xi32>"]))
    assert "m.mlir:2" in message and "no integer k" in message


def test_erf_of_complex_is_a_located_error():
    message = _error(call("mhlo.erf", "tensor<4xcomplex<f32>>", ["tensor<4xcomplex<f32>>"]))
    assert "m.mlir:2" in message and "mhlo.erf" in message and "floating-point" in message


def test_unknown_mhlo_target_keeps_its_error():
    message = _error(call("mhlo.frobnicate", "tensor<4xf32>", ["tensor<4xf32>"]))
    assert "mhlo.frobnicate" in message and "m.mlir:2" in message


def test_dynamic_declared_result_gets_a_cast(tmp_path):
    """The pass alone keeps a dynamic declared result type (through tensor.cast)."""
    path = tmp_path / "dyn.mlir"
    path.write_text(call("mhlo.sinh", "tensor<3xf32>", ["tensor<?xf32>"]))
    out = subprocess.run([sys.executable, "-m", "kiln.cli.opt", str(path), "--pass",
                          "kiln-lower-jax-custom-calls"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "custom_call" not in out.stdout and "tensor.cast" in out.stdout
    assert "math.sinh" in out.stdout
