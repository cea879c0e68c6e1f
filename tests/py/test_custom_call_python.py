"""Custom calls with Python-callable targets: `fn(results, operands, *, attributes,
backend_config)` receiving numpy views, for every api_version including the typed FFI (4)."""
from __future__ import annotations

import os
import traceback

import numpy as np
import pytest

import kiln
from kiln.errors import CustomCallError, KilnError


def one_call(target: str, in_types: list[str], out_types: list[str], attrs: str = "") -> str:
    args = ", ".join(f"%a{i}: {t}" for i, t in enumerate(in_types))
    names = ", ".join(f"%a{i}" for i in range(len(in_types)))
    res = "%r" if len(out_types) == 1 else f"%r:{len(out_types)}"
    rets = "%r" if len(out_types) == 1 else ", ".join(f"%r#{i}" for i in range(len(out_types)))
    outs = out_types[0] if len(out_types) == 1 else "(" + ", ".join(out_types) + ")"
    return (f"func.func @main({args}) -> ({', '.join(out_types)}) {{\n"
            f"  {res} = stablehlo.custom_call @{target}({names}) {attrs} : "
            f"({', '.join(in_types)}) -> {outs}\n"
            f"  return {rets} : {', '.join(out_types)}\n}}")


def test_views_and_backend_config(rng):
    seen = {}

    def target(results, operands, *, attributes, backend_config):
        seen.update(backend_config=backend_config, attributes=attributes,
                    shapes=[o.shape for o in operands], dtypes=[o.dtype for o in operands],
                    writeable=[o.flags.writeable for o in operands])
        results[0][...] = operands[0] * 2
        results[1][...] = operands[1].sum()

    kiln.register_custom_call("py_views", target)
    src = one_call("py_views", ["tensor<2x3xf32>", "tensor<4xi64>"], ["tensor<2x3xf32>", "tensor<i64>"],
                   '{api_version = 2 : i32, backend_config = "hello \\22world\\22"}')
    x = rng.standard_normal((2, 3)).astype(np.float32)
    y = np.array([1, 2, 3, -2**62], np.int64)
    r0, r1 = kiln.compile(src)(x, y)
    np.testing.assert_array_equal(r0, x * 2)
    assert r1.shape == () and r1 == y.sum()
    assert seen == {"backend_config": 'hello "world"', "attributes": {}, "shapes": [(2, 3), (4,)],
                    "dtypes": [np.float32, np.int64], "writeable": [False, False]}


def test_typed_ffi_attributes():
    seen = {}

    def potrf_like(results, operands, *, attributes, backend_config):
        seen.update(attributes)
        seen["backend_config"] = backend_config
        results[0][...] = operands[0] + attributes["uplo"]

    kiln.register_custom_call("py_ffi_attrs", potrf_like, api_version=4)
    attrs = ('{api_version = 4 : i32, mhlo.backend_config = {uplo = 76 : ui8, big = 200 : ui8, '
             'eps = 2.5e-1 : f32, name = "lower", flag = true, dims = array<i64: 1, 2>, '
             'table = dense<[[1, 2], [3, 4]]> : tensor<2x2xi32>, nested = {k = -1 : i64}, '
             'list = [1 : i32, "a"]}}')
    src = one_call("py_ffi_attrs", ["tensor<3xi32>"], ["tensor<3xi32>"], attrs)
    (r,) = kiln.compile(src)(np.array([0, 1, -1], np.int32))
    np.testing.assert_array_equal(r, [76, 77, 75])
    table = seen.pop("table")
    np.testing.assert_array_equal(table, [[1, 2], [3, 4]])
    dims = seen.pop("dims")
    np.testing.assert_array_equal(dims, [1, 2])
    assert seen == {"uplo": 76, "big": 200, "eps": 0.25, "name": "lower", "flag": True,
                    "nested": {"k": -1}, "list": [1, "a"], "backend_config": ""}
    # Registered for the FFI: a call with another api_version is rejected when compiling.
    with pytest.raises(KilnError, match="registered for api_version 4"):
        kiln.compile(one_call("py_ffi_attrs", ["tensor<3xi32>"], ["tensor<3xi32>"]))


def test_dictionary_backend_config_ffi():
    def target(results, operands, *, attributes, backend_config):
        results[0][...] = operands[0] * attributes["k"]

    kiln.register_custom_call("py_ffi_dict_cfg", target, api_version=4)
    src = one_call("py_ffi_dict_cfg", ["tensor<2xf64>"], ["tensor<2xf64>"],
                   "{api_version = 4 : i32, backend_config = {k = 3.0 : f64}}")
    np.testing.assert_array_equal(kiln.compile(src)(np.array([1.0, -0.0]))[0], [3.0, -0.0])


def test_python_exception_propagates_with_traceback():
    class Boom(RuntimeError):
        pass

    def failing_target(results, operands, *, attributes, backend_config):
        raise Boom("target exploded")

    kiln.register_custom_call("py_raises", failing_target)
    exe = kiln.compile(one_call("py_raises", ["tensor<2xf32>"], ["tensor<2xf32>"]))
    with pytest.raises(Boom, match="target exploded") as info:
        exe(np.zeros(2, np.float32))
    frames = [f.name for f in traceback.extract_tb(info.value.__traceback__)]
    assert "failing_target" in frames


def test_returning_a_value_is_an_error():
    kiln.register_custom_call("py_returns", lambda results, operands, **kw: operands[0] + 1)
    exe = kiln.compile(one_call("py_returns", ["tensor<2xf32>"], ["tensor<2xf32>"]))
    with pytest.raises(CustomCallError, match="returned a value"):
        exe(np.zeros(2, np.float32))


def test_layouts_give_strided_views(rng):
    # Column-major operand and result layouts (as JAX's LAPACK calls use): the target sees
    # logical shapes over Fortran-ordered memory.
    seen = {}

    def target(results, operands, *, attributes, backend_config):
        seen["in_f"] = operands[0].flags.f_contiguous
        seen["out_f"] = results[0].flags.f_contiguous
        results[0][...] = operands[0].T @ operands[0]

    kiln.register_custom_call("py_colmajor", target)
    attrs = ("{operand_layouts = [dense<[0, 1]> : tensor<2xindex>], "
             "result_layouts = [dense<[0, 1]> : tensor<2xindex>]}")
    src = one_call("py_colmajor", ["tensor<4x3xf64>"], ["tensor<3x3xf64>"], attrs)
    x = rng.standard_normal((4, 3))
    (r,) = kiln.compile(src)(x)
    np.testing.assert_allclose(r, x.T @ x)
    assert seen == {"in_f": True, "out_f": True}


def test_output_operand_alias_shares_the_buffer(rng):
    seen = {}

    def in_place(results, operands, *, attributes, backend_config):
        seen["initial"] = results[0].copy()
        seen["shared"] = np.shares_memory(results[0], operands[0])
        results[0] *= 10

    kiln.register_custom_call("py_alias", in_place)
    attrs = ("{output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [0], "
             "operand_index = 0, operand_tuple_indices = []>]}")
    src = """
func.func @main(%x: tensor<3xf32>, %y: tensor<i32>) -> (tensor<3xf32>, tensor<i32>, tensor<3xf32>) {
  %r:2 = stablehlo.custom_call @py_alias(%x, %y) %ATTRS : (tensor<3xf32>, tensor<i32>) -> (tensor<3xf32>, tensor<i32>)
  %z = stablehlo.add %x, %x : tensor<3xf32>
  return %r#0, %r#1, %z : tensor<3xf32>, tensor<i32>, tensor<3xf32>
}""".replace("%ATTRS", attrs)
    x = np.array([1, 2, 3], np.float32)
    r, _, z = kiln.compile(src)(x, np.int32(0))
    np.testing.assert_array_equal(seen["initial"], x)
    assert seen["shared"]
    np.testing.assert_array_equal(r, x * 10)
    np.testing.assert_array_equal(z, x * 2)  # the operand itself was not overwritten


def test_unsigned_bool_and_empty_buffers():
    def target(results, operands, *, attributes, backend_config):
        u, b, e = operands
        assert u.dtype == np.uint8 and b.dtype == np.bool_ and e.shape == (0, 4)
        results[0][...] = u + np.uint8(1)  # wraps at 255
        results[1][...] = ~b
        results[2][...] = 0

    kiln.register_custom_call("py_types", target)
    src = one_call("py_types", ["tensor<3xui8>", "tensor<2xi1>", "tensor<0x4xf32>"],
                   ["tensor<3xui8>", "tensor<2xi1>", "tensor<0x4xf32>"])
    u, b, e = kiln.compile(src)(np.array([0, 7, 255], np.uint8), np.array([True, False]),
                                np.zeros((0, 4), np.float32))
    np.testing.assert_array_equal(u, [1, 8, 0])
    np.testing.assert_array_equal(b, [False, True])
    assert e.shape == (0, 4)


def test_special_float_values_pass_through():
    kiln.register_custom_call("py_copy", lambda results, operands, **kw: results[0].__setitem__(
        Ellipsis, operands[0]))
    x = np.array([np.nan, np.inf, -np.inf, -0.0, 1e-45], np.float32)
    (r,) = kiln.compile(one_call("py_copy", ["tensor<5xf32>"], ["tensor<5xf32>"]))(x)
    np.testing.assert_array_equal(r, x)
    assert np.signbit(r[3])


WHILE = """
func.func @main(%x: tensor<8xf32>) -> tensor<8xf32> {
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %n = stablehlo.constant dense<10000> : tensor<i32>
  %one = stablehlo.constant dense<1> : tensor<i32>
  %r:2 = stablehlo.while(%i = %c0, %v = %x) : tensor<i32>, tensor<8xf32>
   cond {
    %p = stablehlo.compare LT, %i, %n : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %p : tensor<i1>
  } do {
    %w = stablehlo.custom_call @py_add_one(%v) : (tensor<8xf32>) -> tensor<8xf32>
    %j = stablehlo.add %i, %one : tensor<i32>
    stablehlo.return %j, %w : tensor<i32>, tensor<8xf32>
  }
  return %r#1 : tensor<8xf32>
}"""


def rss_bytes() -> int:
    with open(f"/proc/{os.getpid()}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def add_one(results, operands, *, attributes, backend_config):
    results[0][...] = operands[0] + 1


def test_python_target_10000_times_in_a_while_loop_does_not_leak():
    kiln.register_custom_call("py_add_one", add_one)
    exe = kiln.compile(WHILE)
    x = np.arange(8, dtype=np.float32)
    np.testing.assert_array_equal(exe(x)[0], x + 10000)  # warm-up: caches, allocator pools
    before = rss_bytes()
    for _ in range(3):
        (r,) = exe(x)
    np.testing.assert_array_equal(r, x + 10000)
    # 30,000 more calls; a leak of even one 32-byte buffer per call would show as ~1 MB.
    assert rss_bytes() - before < 8 << 20


def test_python_target_10000_executable_calls_do_not_leak():
    kiln.register_custom_call("py_add_one", add_one)
    exe = kiln.compile(one_call("py_add_one", ["tensor<8xf32>"], ["tensor<8xf32>"]))
    x = np.arange(8, dtype=np.float32)
    for _ in range(500):
        exe(x)
    before = rss_bytes()
    for _ in range(10000):
        (r,) = exe(x)
    np.testing.assert_array_equal(r, x + 1)
    assert rss_bytes() - before < 8 << 20


def test_side_effect_only_call_with_no_results():
    log = []
    kiln.register_custom_call("py_log", lambda results, operands, **kw: log.append(
        (len(results), operands[0].tolist())))
    src = """
func.func @main(%x: tensor<2xi32>) -> tensor<2xi32> {
  stablehlo.custom_call @py_log(%x) {has_side_effect = true} : (tensor<2xi32>) -> ()
  %y = stablehlo.add %x, %x : tensor<2xi32>
  return %y : tensor<2xi32>
}"""
    (y,) = kiln.compile(src)(np.array([3, -4], np.int32))
    np.testing.assert_array_equal(y, [6, -8])
    assert log == [(0, [3, -4])]


def test_python_target_may_run_another_program():
    kiln.register_custom_call("py_add_one", add_one)
    inner = kiln.compile(one_call("py_add_one", ["tensor<8xf32>"], ["tensor<8xf32>"]))

    def outer(results, operands, *, attributes, backend_config):
        results[0][...] = inner(operands[0])[0] * 2

    def failing_outer(results, operands, *, attributes, backend_config):
        raise ValueError("outer failed after inner ran: " + str(inner(operands[0])[0][0]))

    kiln.register_custom_call("py_nested", outer)
    kiln.register_custom_call("py_nested_fail", failing_outer)
    x = np.arange(8, dtype=np.float32)
    np.testing.assert_array_equal(
        kiln.compile(one_call("py_nested", ["tensor<8xf32>"], ["tensor<8xf32>"]))(x)[0], (x + 1) * 2)
    with pytest.raises(ValueError, match="outer failed after inner ran: 1.0"):
        kiln.compile(one_call("py_nested_fail", ["tensor<8xf32>"], ["tensor<8xf32>"]))(x)


def test_jax_style_ffi_call_is_typed_ffi(rng):
    # JAX emits FFI calls with api_version = 1 and a dictionary mhlo.backend_config, batch
    # dimensions major and column-major matrices, and the factor aliased to the input.
    seen = {}

    def potrf(results, operands, *, attributes, backend_config):
        seen.update(attributes, f_order=operands[0][0].flags.f_contiguous)
        results[0][...] = np.linalg.cholesky(operands[0])
        results[1][...] = 0

    kiln.register_custom_call("py_jax_potrf", potrf, api_version=4)
    src = """
func.func @main(%a: tensor<2x3x3xf32>) -> (tensor<2x3x3xf32>, tensor<2xi32>) {
  %r:2 = stablehlo.custom_call @py_jax_potrf(%a) {backend_config = "", mhlo.backend_config = {uplo = 76 : ui8},
      mhlo.frontend_attributes = {num_batch_dims = "1"}, operand_layouts = [dense<[1, 2, 0]> : tensor<3xindex>],
      output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [0], operand_index = 0, operand_tuple_indices = []>],
      result_layouts = [dense<[1, 2, 0]> : tensor<3xindex>, dense<0> : tensor<1xindex>]}
    : (tensor<2x3x3xf32>) -> (tensor<2x3x3xf32>, tensor<2xi32>)
  return %r#0, %r#1 : tensor<2x3x3xf32>, tensor<2xi32>
}"""
    m = rng.standard_normal((2, 3, 3)).astype(np.float32)
    a = m @ m.transpose(0, 2, 1) + 3 * np.eye(3, dtype=np.float32)
    factor, info = kiln.compile(src)(a)
    np.testing.assert_allclose(factor, np.linalg.cholesky(a), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(info, [0, 0])
    assert seen == {"uplo": 76, "f_order": True}


def test_typed_ffi_call_from_hlo_text():
    def target(results, operands, *, attributes, backend_config):
        results[0][...] = operands[0][::-1]
        results[1][...] = operands[0].size

    kiln.register_custom_call("py_hlo_ffi", target, api_version=4)
    hlo = """HloModule ffi

ENTRY main {
  x = f32[4] parameter(0)
  cc = (f32[4], s32[]) custom-call(x), custom_call_target="py_hlo_ffi", api_version=API_VERSION_TYPED_FFI, backend_config={}
  ROOT r = f32[4] get-tuple-element(cc), index=0
}
"""
    x = np.array([1, 2, np.nan, -0.0], np.float32)
    np.testing.assert_array_equal(kiln.compile(hlo)(x)[0], x[::-1])


def test_failures_stay_in_their_thread():
    import threading

    def bad(results, operands, **kw):
        raise ValueError("only this thread fails")

    kiln.register_custom_call("py_add_one", add_one)
    kiln.register_custom_call("py_thread_bad", bad)
    good = kiln.compile(one_call("py_add_one", ["tensor<8xf32>"], ["tensor<8xf32>"]))
    failing = kiln.compile(one_call("py_thread_bad", ["tensor<8xf32>"], ["tensor<8xf32>"]))
    x = np.zeros(8, np.float32)
    problems = []

    def run_good():
        for _ in range(300):
            if not (good(x)[0] == 1).all():
                problems.append("wrong result")

    def run_failing():
        for _ in range(300):
            try:
                failing(x)
                problems.append("no error")
            except ValueError as exc:
                if "only this thread fails" not in str(exc):
                    problems.append(str(exc))

    threads = [threading.Thread(target=run_good), threading.Thread(target=run_failing)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert problems == []
