"""The ops of the spec the StableHLO testdata never uses (batch_norm_*, cholesky, rng,
async-start/done): Kiln's own conformance cases (tests/conformance/ops/) pass and are what
their generator makes, and stablehlo.rng keeps the spec's promises on every element type."""
import importlib.util

import ml_dtypes
import numpy as np
import pytest

import kiln
from kiln import conformance

from conftest import REPO

OPS = REPO / "tests" / "conformance" / "ops"
CASES = sorted(p.name for p in conformance.discover([str(OPS)]))


def test_every_op_missing_from_the_testdata_has_a_case():
    for op in ("batch_norm_inference", "batch_norm_training", "batch_norm_grad", "cholesky",
               "rng_uniform", "rng_normal", "async_start_done.hlo"):
        assert any(name.startswith(op) for name in CASES), (op, CASES)


@pytest.mark.parametrize("name", CASES)
def test_conformance_case_passes(name):
    result = conformance.run_file(str(OPS / name))
    assert result.passed, result.detail
    assert "checks" in result.detail or "reference interpreter" in result.detail


def _generator():
    spec = importlib.util.spec_from_file_location(
        "generate_ops", REPO / "tests" / "conformance" / "generate_ops.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cases_are_what_the_generator_writes(tmp_path, monkeypatch):
    """The expected values come from the reference interpreter through the script, not by
    hand: regenerating reproduces every file byte for byte."""
    generator = _generator()
    monkeypatch.setattr(generator, "OUT", tmp_path)
    written = generator.generate()
    assert written and sorted(written) == sorted(n for n in CASES if n.endswith(".mlir"))
    for name in written:
        assert (tmp_path / name).read_text() == (OPS / name).read_text(), name


def test_spec_definition_oracle_catches_a_wrong_epsilon():
    """The oracle is sensitive: the case with another epsilon fails its checks."""
    text = (OPS / "batch_norm_inference_f32_2x3x4x4_feature1.mlir").read_text()
    wrong = text.replace("epsilon = 1.000000e-03", "epsilon = 1.000000e-01")
    assert wrong != text
    _, outcomes = kiln.compile(wrong).run_checks()
    assert outcomes and not all(o.passed for o in outcomes)


# -- stablehlo.rng ---------------------------------------------------------------------------
DTYPES = {"bf16": ml_dtypes.bfloat16, "f16": np.float16, "f32": np.float32, "f64": np.float64,
          "i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64, "ui8": np.uint8,
          "ui32": np.uint32}


def _rng(distribution: str, element: str, a, b, shape):
    t = "tensor<" + "".join(f"{d}x" for d in shape) + element + ">"
    s = f"tensor<{element}>"
    source = (f"func.func @main(%a: {s}, %b: {s}) -> {t} {{\n"
              f"  %shape = stablehlo.constant dense<[{', '.join(map(str, shape))}]> : tensor<{len(shape)}xi64>\n"
              f"  %r = stablehlo.rng %a, %b, %shape, distribution = {distribution} : "
              f"({s}, {s}, tensor<{len(shape)}xi64>) -> {t}\n  return %r : {t}\n}}")
    dtype = DTYPES[element]
    return kiln.compile(source)(np.array(a, dtype), np.array(b, dtype))[0]


@pytest.mark.parametrize("element", ["bf16", "f16", "f32"])
def test_uniform_never_reaches_b(element):
    """a + (b - a) * u rounds up to b for u near 1 in a narrow type: those values must not
    appear (the spec's interval is [a, b))."""
    r = _rng("UNIFORM", element, -2.0, 3.0, (256, 256)).astype(np.float64)
    assert r.min() >= -2.0 and r.max() < 3.0
    assert r.max() > 2.9 and r.min() < -1.9  # the range is covered


@pytest.mark.parametrize("element,a,b", [("i32", -5, 7), ("i8", -128, 127), ("ui8", 0, 255),
                                         ("i64", -(2 ** 62), 2 ** 62), ("ui32", 10, 11),
                                         ("i16", 3, 3), ("i32", 9, 2)])
def test_integer_uniform(element, a, b):
    r = _rng("UNIFORM", element, a, b, (64, 64))
    if b <= a:  # implementation-defined by the spec: Kiln gives a
        assert (r == a).all()
        return
    assert r.min() >= a and r.max() < b
    if b - a <= 256:  # 4096 draws hit every value of a small range
        assert len(np.unique(r)) == b - a
    else:
        assert r.min() < a + (b - a) // 100 and r.max() > b - (b - a) // 100


def test_integer_normal_is_a_located_error():
    with pytest.raises(kiln.KilnError) as info:
        _rng("NORMAL", "i32", 0, 1, (4,))
    assert "<string>:3" in str(info.value) and "rng" in str(info.value)
