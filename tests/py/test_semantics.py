"""Op semantics where upstream's lowering differs from StableHLO/XLA, and the narrow floats."""
import ml_dtypes
import numpy as np
import pytest

import kiln
from conftest import binary, unary
from kiln.lowering.legalize.floats import NARROW
from kiln.runtime.dtypes import numpy_dtype

BOOLS = (np.array([False, False, True, True]), np.array([False, True, False, True]))


@pytest.mark.parametrize("op,want", [("add", [0, 1, 1, 1]), ("multiply", [0, 0, 0, 1]),
                                     ("maximum", [0, 1, 1, 1]), ("minimum", [0, 0, 0, 1])])
def test_bool_arithmetic(op, want):
    out = kiln.compile(binary(f"stablehlo.{op}", "tensor<4xi1>"))(*BOOLS)[0]
    np.testing.assert_array_equal(out.astype(int), want)


def test_integer_division_and_remainder_edge_cases():
    a = np.array([7, -7, -2**31, -2**31, 0], np.int32)
    b = np.array([0, 0, -1, 0, 0], np.int32)
    div = kiln.compile(binary("stablehlo.divide", "tensor<5xi32>"))(a, b)[0]
    rem = kiln.compile(binary("stablehlo.remainder", "tensor<5xi32>"))(a, b)[0]
    np.testing.assert_array_equal(div, [-1, -1, -2**31, -1, -1])   # x/0 = -1; MIN/-1 = MIN
    np.testing.assert_array_equal(rem, [7, -7, 0, -2**31, 0])      # x%0 = x; MIN%-1 = 0
    u = np.array([7, 0], np.uint32)
    assert list(kiln.compile(binary("stablehlo.divide", "tensor<2xui32>"))(u, np.zeros(2, np.uint32))[0]) \
        == [2**32 - 1] * 2


def test_shifts_by_bit_width_or_more():
    a = np.array([-5, 3, 1, -1, 7], np.int32)
    s = np.array([1, 40, 31, 32, -1], np.int32)
    run = lambda op: kiln.compile(binary(f"stablehlo.{op}", "tensor<5xi32>"))(a, s)[0]
    np.testing.assert_array_equal(run("shift_left"), [-10, 0, -2**31, 0, 0])
    np.testing.assert_array_equal(run("shift_right_logical"), [2**31 - 3, 0, 0, 0, 0])
    np.testing.assert_array_equal(run("shift_right_arithmetic"), [-3, 0, 0, -1, 0])


def test_count_leading_zeros_and_popcnt():
    x = np.array([0, 1, -1, 16, 127], np.int8)
    assert list(kiln.compile(unary("stablehlo.count_leading_zeros", "tensor<5xi8>"))(x)[0]) == [8, 7, 0, 3, 1]
    assert list(kiln.compile(unary("stablehlo.popcnt", "tensor<5xi8>"))(x)[0]) == [0, 1, 8, 1, 7]


def convert(x, src, dst):
    t = lambda e: f"tensor<{x.size}x{e}>"
    return kiln.compile(f"func.func @main(%x: {t(src)}) -> {t(dst)} {{\n"
                        f"  %0 = stablehlo.convert %x : ({t(src)}) -> {t(dst)}\n"
                        f"  return %0 : {t(dst)}\n}}")(x)[0]


F = np.array([np.nan, np.inf, -np.inf, 3e9, -3e9, 2.7, -2.7, -0.5, 300.0, -1.0, -0.0], np.float32)


@pytest.mark.parametrize("dst", ["i8", "i16", "i32", "i64", "ui8", "ui32", "ui64"])
def test_float_to_int_saturates_like_xla(dst):
    info = np.iinfo(numpy_dtype(dst))
    wide = F.astype(np.float64)
    clipped = np.clip(np.trunc(np.nan_to_num(wide, posinf=1e300, neginf=-1e300)), info.min, info.max)
    want = [0 if np.isnan(v) else int(c) for v, c in zip(wide, clipped)]
    got = convert(F, "f32", dst)
    assert [int(v) for v in got] == [min(max(w, int(info.min)), int(info.max)) for w in want]


def test_f16_and_complex_to_int():
    h = np.array([np.nan, np.inf, -np.inf, 65504, -2.5], np.float16)
    np.testing.assert_array_equal(convert(h, "f16", "i32"), [0, 2**31 - 1, -2**31, 65504, -2])
    np.testing.assert_array_equal(convert(h, "f16", "ui8"), [0, 255, 0, 255, 0])
    c = np.array([1.5 + 2j, np.nan + 1j], np.complex64)
    np.testing.assert_array_equal(convert(c, "complex<f32>", "i32"), [1, 0])


def test_to_bool_is_nonzero():
    np.testing.assert_array_equal(convert(np.array([0, 1, 2, -1], np.int32), "i32", "i1"), [0, 1, 1, 1])
    np.testing.assert_array_equal(convert(np.array([0.0, -0.0, np.nan, 0.5], np.float32), "f32", "i1"),
                                  [0, 0, 1, 1])


@pytest.mark.parametrize("op,pick", [("maximum", [1, 0, 1, 0]), ("minimum", [0, 1, 0, 0])])
def test_complex_extrema_are_lexicographic(op, pick):
    # The left operand only when strictly greater (smaller) by (real, then imaginary); a NaN
    # real part compares false, so the right operand wins.
    a = np.array([2 + 0j, 1 + 1j, 1 + 1j, np.nan + 0j], np.complex64)
    b = np.array([1 + 5j, 1 + 2j, 1 + 0.5j, 0 + 0j], np.complex64)
    got = kiln.compile(binary(f"stablehlo.{op}", "tensor<4xcomplex<f32>>"))(a, b)[0]
    np.testing.assert_array_equal(got, np.where(np.array(pick, bool), a, b))


def test_reduce_precision_zero_mantissa_turns_nan_into_inf():
    x = np.array([np.nan, 1.5, 65520.0, -np.nan], np.float64)
    src = unary("stablehlo.reduce_precision", "tensor<4xf64>").replace(
        "%x : tensor<4xf64>", "%x, format = e5m0 : tensor<4xf64>")
    got = kiln.compile(src)(x)[0]
    assert got[0] == np.inf and got[3] == np.inf and got[1] == 2.0 and got[2] == np.inf


def _all_values(name):
    bits = {"f4E2M1FN": 4, "f6E2M3FN": 6, "f6E3M2FN": 6}.get(name, 8)
    return np.arange(1 << bits, dtype=np.uint8).view(NARROW[name])


def _same(a, b):
    a, b = a.astype(np.float64), b.astype(np.float64)
    return (a == b) | (np.isnan(a) & np.isnan(b))


@pytest.mark.parametrize("name", sorted(NARROW))
def test_narrow_float_widening_is_exact(name):
    x = _all_values(name)
    got = convert(x, name, "f32")
    assert np.all(_same(got, x.astype(np.float32)))


@pytest.mark.parametrize("name", sorted(NARROW))
@pytest.mark.parametrize("src", ["f32", "f64"])
def test_narrow_float_rounding_matches_ml_dtypes(rng, name, src):
    dt = NARROW[name]
    values = _all_values(name).astype(np.float64)
    finite = values[np.isfinite(values)]
    finite = np.unique(finite)
    mids = (finite[:-1] + finite[1:]) / 2          # exact ties: round half to even
    samples = np.concatenate([
        finite, mids, np.nextafter(mids, np.inf), np.nextafter(mids, -np.inf),
        rng.uniform(-1.2, 1.2, 200) * float(ml_dtypes.finfo(dt).max),
        rng.standard_normal(200) * float(ml_dtypes.finfo(dt).smallest_subnormal) * 4,
        [np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1e30, -1e30]]).astype(np.float32)
    if name == "f8E8M0FNU":
        # ml_dtypes rounds f32 subnormals up for E8M0; Kiln rounds them to nearest (checked below).
        samples = samples[~((np.abs(samples) < 2.0 ** -126) & (samples != 0))]
    # f32-representable samples: ml_dtypes converts f64 through f32 (rounding twice), which
    # only matters off f32 values (see the test below).
    samples = samples.astype(np.float32 if src == "f32" else np.float64)
    got = convert(samples, src, name)
    want = samples.astype(dt)
    mismatch = ~_same(got, want)
    assert not mismatch.any(), (samples[mismatch][:5], got[mismatch][:5], want[mismatch][:5])


@pytest.mark.parametrize("name", ["f8E4M3FN", "f8E5M2", "f4E2M1FN"])
def test_narrow_float_arithmetic_rounds_once(rng, name):
    dt = NARROW[name]
    x, y = _all_values(name), np.roll(_all_values(name), 5)
    t = f"tensor<{x.size}x{name}>"
    for op, f in [("add", np.add), ("multiply", np.multiply), ("divide", np.divide)]:
        got = kiln.compile(binary(f"stablehlo.{op}", t))(x, y)[0]
        with np.errstate(all="ignore"):
            want = f(x.astype(np.float32), y.astype(np.float32)).astype(dt)
        assert np.all(_same(got, want)), op
    got = kiln.compile(unary("stablehlo.exponential", t))(x)[0]
    with np.errstate(all="ignore"):
        want = np.exp(x.astype(np.float32)).astype(dt)
    assert np.mean(_same(got, want)) > 0.97  # exp in f32 may differ by an f32 ULP before rounding


def test_f64_to_f8_rounds_once():
    # Just off the tie between 416 and 448: correctly rounded, not via f32 (where both become
    # the tie 432 and round to even, 448).
    below, above = np.nextafter(432.0, 0.0), np.nextafter(432.0, 1e9)
    got = convert(np.array([below, above, 432.0]), "f64", "f8E4M3FN").astype(np.float64)
    np.testing.assert_array_equal(got, [416.0, 448.0, 448.0])


def test_e8m0_rounds_to_the_nearest_power_of_two():
    x = np.array([1.5, 3.0, 0.75, 1e6, 8.8e-39, 9e-39, 1e-45, 0.0, -1.0, 2.0 ** 127 * 1.6], np.float32)
    got = convert(x, "f32", "f8E8M0FNU").astype(np.float64)
    want = [2.0, 4.0, 1.0, 2.0 ** 20, 2.0 ** -127, 2.0 ** -126, 2.0 ** -127, np.nan, np.nan, np.nan]
    np.testing.assert_array_equal(got, want)


def test_complex_cbrt_is_the_principal_root():
    z = np.array([3 + 4j, -8 + 0j, 1e30 + 1e30j, 0j, -1 - 1j], np.complex64)
    got = kiln.compile(unary("stablehlo.cbrt", "tensor<5xcomplex<f32>>"))(z)[0]
    zz = z.astype(np.complex128)
    want = np.abs(zz) ** (1 / 3) * np.exp(1j * np.angle(zz) / 3)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-30)


@pytest.mark.parametrize("op,f", [("log_plus_one", np.log1p), ("exponential_minus_one", np.expm1)])
@pytest.mark.parametrize("dtype,elem", [(np.float32, "f32"), (np.float64, "f64"),
                                        (ml_dtypes.bfloat16, "bf16")])
def test_log1p_expm1_are_accurate_for_small_arguments(op, f, dtype, elem):
    x = np.array([1e-30, -3e-8, 1e-5, 0.0078125, -0.3, 0.5, 3.0], np.float64).astype(dtype)
    got = kiln.compile(unary(f"stablehlo.{op}", f"tensor<7x{elem}>"))(x)[0]
    want = f(x.astype(np.float64)).astype(dtype)
    from kiln.runtime.checks import ulp_distance
    assert ulp_distance(got, want).max() <= 1, (got, want)


def test_half_precision_dot_accumulates_in_f32():
    import kiln
    rng = np.random.default_rng(3)
    a = rng.standard_normal((4, 512)).astype(np.float16)
    b = rng.standard_normal((512, 3)).astype(np.float16)
    (got,) = kiln.compile("""func.func @main(%a: tensor<4x512xf16>, %b: tensor<512x3xf16>) -> tensor<4x3xf16> {
      %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : (tensor<4x512xf16>, tensor<512x3xf16>) -> tensor<4x3xf16>
      return %0 : tensor<4x3xf16>
    }""")(a, b)
    # XLA's result: f32 accumulation, one rounding at the end.
    np.testing.assert_array_equal(got, (a.astype(np.float32) @ b.astype(np.float32)).astype(np.float16))


def test_single_replica_ids_are_zero():
    import kiln
    exe = kiln.compile("""func.func @main() -> (tensor<ui32>, tensor<ui32>) {
      %0 = stablehlo.replica_id : tensor<ui32>
      %1 = stablehlo.partition_id : tensor<ui32>
      return %0, %1 : tensor<ui32>, tensor<ui32>
    }""")
    assert [int(v) for v in exe()] == [0, 0]


def test_multi_replica_program_is_a_clear_error():
    import kiln
    with pytest.raises(kiln.KilnError, match="run_parallel launches programs as separate processes"):
        kiln.compile("""func.func @r() -> tensor<ui32> {
          %0 = stablehlo.replica_id : tensor<ui32>
          return %0 : tensor<ui32>
        }
        func.func @main() -> (tensor<ui32>, tensor<ui32>) {
          %r:2 = "interpreter.run_parallel"() {programs = [[@r], [@r]]} : () -> (tensor<ui32>, tensor<ui32>)
          return %r#0, %r#1 : tensor<ui32>, tensor<ui32>
        }""")


def test_dot_algorithm_hint_is_met_at_full_precision():
    import kiln
    exe = kiln.compile("""func.func @main(%a: tensor<2x3xf32>, %b: tensor<3x2xf32>) -> tensor<2x2xf32> {
      %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0],
        algorithm = <lhs_precision_type = tf32, rhs_precision_type = tf32, accumulation_type = f32,
                     lhs_component_count = 1, rhs_component_count = 1, num_primitive_operations = 1,
                     allow_imprecise_accumulation = false> : (tensor<2x3xf32>, tensor<3x2xf32>) -> tensor<2x2xf32>
      return %0 : tensor<2x2xf32>
    }""")
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.arange(6, dtype=np.float32).reshape(3, 2)
    np.testing.assert_array_equal(exe(a, b)[0], a @ b)


def test_tuples_inside_a_function_fold_away():
    import kiln
    exe = kiln.compile("""func.func @main(%x: tensor<2xf64>) -> tensor<2xf64> {
      %t = stablehlo.tuple %x, %x : tuple<tensor<2xf64>, tensor<2xf64>>
      %0 = stablehlo.get_tuple_element %t[1] : (tuple<tensor<2xf64>, tensor<2xf64>>) -> tensor<2xf64>
      %1 = stablehlo.add %0, %x : tensor<2xf64>
      return %1 : tensor<2xf64>
    }""")
    np.testing.assert_array_equal(exe(np.array([1.0, 2.0]))[0], [2.0, 4.0])
