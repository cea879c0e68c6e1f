"""Run-time bounds (issue 25, class 3): sizes, indices and strides a program computes at run
time are checked or clamped as the StableHLO spec says, and built-in targets validate their
operands. Every case that crashed the process (SIGSEGV, SIGFPE) or read memory it did not own
runs in a child process first, so a regression is reported as the signal, not as a dead run.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import kiln

_REDUCE = ("  %z = stablehlo.constant dense<0.0> : tensor<f32>\n"
           "  %sum = stablehlo.reduce(%r init: %z) applies stablehlo.add across dimensions = [0]"
           " : (tensor<?xf32>, tensor<f32>) -> tensor<f32>\n"
           "  return %sum : tensor<f32>\n}")

REAL_DYNAMIC_SLICE = (
    "func.func @main(%x: tensor<16xf32>, %s: tensor<1xi64>, %l: tensor<1xi64>, "
    "%t: tensor<1xi64>) -> tensor<f32> {\n"
    "  %r = stablehlo.real_dynamic_slice %x, %s, %l, %t : (tensor<16xf32>, tensor<1xi64>, "
    "tensor<1xi64>, tensor<1xi64>) -> tensor<?xf32>\n" + _REDUCE)

DYNAMIC_IOTA = (
    "func.func @main(%n: tensor<1xi32>) -> tensor<f32> {\n"
    "  %r = stablehlo.dynamic_iota %n, dim = 0 : (tensor<1xi32>) -> tensor<?xf32>\n" + _REDUCE)

DYNAMIC_BROADCAST = (
    "func.func @main(%x: tensor<4xf32>, %n: tensor<1xui32>) -> tensor<f32> {\n"
    "  %r = stablehlo.dynamic_broadcast_in_dim %x, %n, dims = [0] : (tensor<4xf32>, "
    "tensor<1xui32>) -> tensor<?xf32>\n" + _REDUCE)

SET_DIMENSION_SIZE = (
    "func.func @main(%x: tensor<16xf32>, %n: tensor<i32>) -> tensor<f32> {\n"
    "  %r = stablehlo.set_dimension_size %x, %n, dim = 0 : (tensor<16xf32>, tensor<i32>) "
    "-> tensor<?xf32>\n" + _REDUCE)

CSR = (
    "func.func @main(%d: tensor<4xf32>, %p: tensor<3xi32>, %i: tensor<4xi32>, "
    "%x: tensor<8x64xf32>) -> tensor<2x64xf32> {\n"
    "  %0 = stablehlo.custom_call @cpu_csr_sparse_dense_ffi(%d, %p, %i, %x) "
    "{api_version = 1 : i32, backend_config = \"\", mhlo.backend_config = {}} : "
    "(tensor<4xf32>, tensor<3xi32>, tensor<4xi32>, tensor<8x64xf32>) -> tensor<2x64xf32>\n"
    "  return %0 : tensor<2x64xf32>\n}")


def _isolated(source: str, args=(), env=None) -> dict:
    """Compile and call `source` in a child process (with `env` added to its environment): its
    result, or the error it raised (class and message), or the signal that killed it."""
    script = textwrap.dedent("""
        import json, sys, numpy as np, kiln
        source, args = json.loads(sys.stdin.read())
        args = [np.array(a, dtype=d) for a, d in args]
        try:
            out = kiln.compile(source)(*args)
            print(json.dumps({"result": [np.asarray(o).tolist() for o in out]}))
        except kiln.KilnError as exc:
            print(json.dumps({"error": type(exc).__name__, "message": str(exc)}))
    """)
    payload = json.dumps([source, [[a.tolist(), str(a.dtype)] for a in args]])
    done = subprocess.run([sys.executable, "-c", script], input=payload, capture_output=True,
                          text=True, timeout=300, env={**os.environ, **(env or {})})
    if done.returncode != 0:
        return {"signal": -done.returncode, "stderr": done.stderr[-2000:]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def _rds_args(start: int, limit: int, stride: int) -> list[np.ndarray]:
    return [np.arange(16, dtype=np.float32), np.array([start]), np.array([limit]),
            np.array([stride])]


@pytest.mark.parametrize("start, limit, stride", [
    (-1, 4, 1),       # SIGSEGV before
    (0, 64, 1),       # summed heap memory before
    (0, 1 << 40, 1),  # SIGSEGV before
    (0, 4, 0),        # SIGFPE before
    (0, 4, -1),
    (5, 2, 1),        # limit below start: a negative size
    (-(1 << 63), 0, 1),
])
def test_real_dynamic_slice_out_of_range_is_a_located_error(start, limit, stride):
    outcome = _isolated(REAL_DYNAMIC_SLICE, _rds_args(start, limit, stride))
    assert outcome.get("error") == "KilnError", outcome
    assert "stablehlo.real_dynamic_slice" in outcome["message"]
    assert "<string>:2:8" in outcome["message"]   # the op's line and column in the source
    assert "0 <= start_indices <= limit_indices <= shape(operand)" in outcome["message"]


@pytest.mark.parametrize("start, limit, stride", [(2, 10, 1), (0, 16, 2), (3, 16, 5),
                                                  (16, 16, 1), (0, 0, 7), (15, 16, 100)])
def test_real_dynamic_slice_in_range_computes(start, limit, stride):
    exe = kiln.compile(REAL_DYNAMIC_SLICE)
    (out,) = exe(*_rds_args(start, limit, stride))
    assert out == np.arange(16, dtype=np.float32)[start:limit:stride].sum()


def test_error_leaves_the_executable_usable():
    exe = kiln.compile(REAL_DYNAMIC_SLICE)
    for _ in range(3):   # the failed call freed what it held; the next one runs
        with pytest.raises(kiln.KilnError, match="real_dynamic_slice"):
            exe(*_rds_args(0, 17, 1))
        (out,) = exe(*_rds_args(1, 3, 1))
        assert out == 3.0


def test_static_result_size_must_match():
    src = REAL_DYNAMIC_SLICE.replace("-> tensor<?xf32>", "-> tensor<4xf32>").replace(
        "(tensor<?xf32>, tensor<f32>)", "(tensor<4xf32>, tensor<f32>)")
    exe = kiln.compile(src)
    assert exe(*_rds_args(2, 6, 1))[0] == 2 + 3 + 4 + 5
    assert exe(*_rds_args(0, 16, 4))[0] == 0 + 4 + 8 + 12
    with pytest.raises(kiln.KilnError, match="static shape differs"):
        exe(*_rds_args(0, 5, 1))


def test_dynamic_iota_negative_size():
    exe = kiln.compile(DYNAMIC_IOTA)
    assert exe(np.array([5], np.int32))[0] == 10
    with pytest.raises(kiln.KilnError, match="dynamic_iota.*negative size"):
        exe(np.array([-5], np.int32))


def test_dynamic_broadcast_must_match_or_expand_ones():
    exe = kiln.compile(DYNAMIC_BROADCAST)
    assert exe(np.arange(4, dtype=np.float32), np.array([4], np.uint32))[0] == 6
    outcome = _isolated(DYNAMIC_BROADCAST, [np.arange(4, dtype=np.float32),
                                            np.array([8], np.uint32)])
    assert outcome.get("error") == "KilnError" and "neither 1 nor" in outcome["message"], outcome
    outcome = _isolated(DYNAMIC_BROADCAST, [np.arange(4, dtype=np.float32),
                                            np.array([0xFFFFFFFF], np.uint32)])
    assert outcome.get("error") == "KilnError", outcome


@pytest.mark.parametrize("size, ok", [(0, True), (4, True), (16, True), (17, False),
                                      (40, False), (-1, False)])
def test_set_dimension_size_bounded_by_the_operand(size, ok):
    outcome = _isolated(SET_DIMENSION_SIZE, [np.arange(16, dtype=np.float32),
                                             np.array(size, np.int32)])
    if ok:
        assert outcome.get("result") == [float(sum(range(size)))], outcome
    else:
        assert outcome.get("error") == "KilnError", outcome
        assert "set_dimension_size" in outcome["message"]


# -- ops whose spec clamps or skips: never out of bounds, and the spec's answer -----------------

def test_dynamic_slice_clamps_every_start():
    src = ("func.func @main(%x: tensor<16xf32>, %i: tensor<i64>) -> tensor<4xf32> {\n"
           "  %r = stablehlo.dynamic_slice %x, %i, sizes = [4] : (tensor<16xf32>, tensor<i64>)"
           " -> tensor<4xf32>\n  return %r : tensor<4xf32>\n}")
    exe = kiln.compile(src)
    x = np.arange(16, dtype=np.float32)
    for start in (-(1 << 63), -3, 0, 5, 12, 13, 1 << 40, (1 << 63) - 1):
        clamped = min(max(start, 0), 12)
        np.testing.assert_array_equal(exe(x, np.array(start, np.int64))[0], x[clamped:clamped + 4])


def test_dynamic_update_slice_clamps_every_start():
    src = ("func.func @main(%x: tensor<16xf32>, %u: tensor<4xf32>, %i: tensor<i32>) -> "
           "tensor<16xf32> {\n  %r = stablehlo.dynamic_update_slice %x, %u, %i : "
           "(tensor<16xf32>, tensor<4xf32>, tensor<i32>) -> tensor<16xf32>\n"
           "  return %r : tensor<16xf32>\n}")
    exe = kiln.compile(src)
    for start in (-(1 << 31), -5, 0, 7, 12, 100, (1 << 31) - 1):
        clamped = min(max(start, 0), 12)
        want = np.zeros(16, np.float32)
        want[clamped:clamped + 4] = 1
        got = exe(np.zeros(16, np.float32), np.ones(4, np.float32), np.array(start, np.int32))[0]
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint32, np.uint64])
def test_gather_clamps_start_indices(dtype):
    el = {np.int32: "i32", np.int64: "i64", np.uint32: "ui32", np.uint64: "ui64"}[dtype]
    src = (f"func.func @main(%x: tensor<16xf32>, %i: tensor<4x1x{el}>) -> tensor<4x2xf32> {{\n"
           f"  %r = \"stablehlo.gather\"(%x, %i) {{dimension_numbers = #stablehlo.gather<"
           f"offset_dims = [1], start_index_map = [0], index_vector_dim = 1>, "
           f"slice_sizes = array<i64: 2>}} : (tensor<16xf32>, tensor<4x1x{el}>) -> "
           f"tensor<4x2xf32>\n  return %r : tensor<4x2xf32>\n}}")
    info = np.iinfo(dtype)
    starts = [info.min, info.max, 7, 15]
    x = np.arange(16, dtype=np.float32)
    (got,) = kiln.compile(src)(x, np.array(starts, dtype).reshape(4, 1))
    want = [x[min(max(int(s), 0), 14):][:2] for s in starts]
    np.testing.assert_array_equal(got, np.stack(want))


@pytest.mark.parametrize("dtype", [np.int32, np.uint32, np.int64, np.uint64])
def test_scatter_skips_windows_outside_the_operand(dtype):
    el = {np.int32: "i32", np.int64: "i64", np.uint32: "ui32", np.uint64: "ui64"}[dtype]
    src = (f"func.func @main(%x: tensor<16xf32>, %i: tensor<4x1x{el}>, %u: tensor<4x2xf32>) -> "
           f"tensor<16xf32> {{\n  %r = \"stablehlo.scatter\"(%x, %i, %u) ({{\n"
           f"  ^bb0(%a: tensor<f32>, %b: tensor<f32>):\n"
           f"    %s = stablehlo.add %a, %b : tensor<f32>\n    stablehlo.return %s : tensor<f32>\n"
           f"  }}) {{scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1], "
           f"scatter_dims_to_operand_dims = [0], index_vector_dim = 1>}} : (tensor<16xf32>, "
           f"tensor<4x1x{el}>, tensor<4x2xf32>) -> tensor<16xf32>\n  return %r : tensor<16xf32>\n}}")
    info = np.iinfo(dtype)
    starts = [info.min, info.max, 14, 15]   # only 14 fits a window of 2
    (got,) = kiln.compile(src)(np.zeros(16, np.float32), np.array(starts, dtype).reshape(4, 1),
                               np.ones((4, 2), np.float32))
    want = np.zeros(16, np.float32)
    for s in starts:
        if 0 <= int(s) <= 14:
            want[int(s):int(s) + 2] += 1
    np.testing.assert_array_equal(got, want)


# -- the built-in sparse target ------------------------------------------------------------------

def _csr_args(indptr, indices):
    return [np.ones(4, np.float32), np.array(indptr, np.int32), np.array(indices, np.int32),
            np.arange(8 * 64, dtype=np.float32).reshape(8, 64)]


def test_csr_target_valid_operands():
    exe = kiln.compile(CSR)
    args = _csr_args([0, 2, 4], [0, 7, 3, 3])
    (got,) = exe(*args)
    x = args[3]
    np.testing.assert_allclose(got, np.stack([x[0] + x[7], 2 * x[3]]))


@pytest.mark.parametrize("indptr, indices, what", [
    ([0, 2, 4], [0, 1_000_000, 3, 3], "column index 1000000"),   # SIGSEGV before
    ([0, 2, 4], [0, 8, 3, 3], "column index 8"),                 # read past the rhs before
    ([0, 2, 4], [0, -1, 3, 3], "column index -1"),
    ([0, 3, 2], [0, 1, 2, 3], "never decrease"),
    ([0, 2, 9], [0, 1, 2, 3], "end at most"),
    ([1, 2, 4], [0, 1, 2, 3], "start at 0"),
    ([0, 2, -7], [0, 1, 2, 3], "never decrease"),
])
def test_csr_target_rejects_bad_operands(indptr, indices, what):
    outcome = _isolated(CSR, _csr_args(indptr, indices))
    assert outcome.get("error") == "CustomCallError", outcome
    assert "cpu_csr_sparse_dense_ffi" in outcome["message"] and what in outcome["message"]


# -- the built-in LAPACK targets: operands and results that do not fit the routine -------------

@pytest.mark.parametrize("name, operands, results, what", [
    ("lapack_sgetrf_ffi", [np.eye(4, dtype=np.float32)],
     [np.zeros((3, 3), np.float32), np.zeros(4, np.int32), np.zeros((), np.int32)], "(3, 3)"),
    ("lapack_sgetrf_ffi", [np.eye(4, dtype=np.float32)],
     [np.zeros((4, 4), np.float32), np.zeros(1, np.int32), np.zeros((), np.int32)], "(1,)"),
    # a batch of 2 with a rank-0 info: the batch sizes disagree
    ("lapack_spotrf_ffi", [np.stack([np.eye(4, dtype=np.float32)] * 2)],
     [np.zeros((2, 4, 4), np.float32), np.zeros((), np.int32)], "(2, 4, 4)"),
    ("lapack_strsm_ffi", [np.eye(4, dtype=np.float32), np.ones((3, 2), np.float32)],
     [np.zeros((3, 2), np.float32)], "(3, 2)"),
])
def test_lapack_targets_report_shapes_that_do_not_fit(name, operands, results, what):
    from kiln.errors import CustomCallError
    from kiln.runtime import lapack
    attributes = {"uplo": 76, "side": 76, "trans_x": 78, "diag": 78}
    with pytest.raises(CustomCallError, match=f"{name}: the operand and result shapes") as info:
        lapack.targets()[name](results, operands, attributes=attributes)
    assert what in str(info.value)


def test_lapack_shape_error_from_a_program_is_a_custom_call_error():
    src = ("func.func @main(%a: tensor<4x4xf32>) -> (tensor<3x3xf32>, tensor<4xi32>, tensor<i32>) {\n"
           "  %r:3 = stablehlo.custom_call @lapack_sgetrf_ffi(%a) {api_version = 4 : i32, "
           "mhlo.backend_config = {}} : (tensor<4x4xf32>) -> (tensor<3x3xf32>, tensor<4xi32>, "
           "tensor<i32>)\n  return %r#0, %r#1, %r#2 : tensor<3x3xf32>, tensor<4xi32>, tensor<i32>\n}")
    from kiln.errors import CustomCallError
    with pytest.raises(CustomCallError, match="lapack_sgetrf_ffi: the operand and result shapes"):
        kiln.compile(src)(np.eye(4, dtype=np.float32))


# -- shape agreement: dynamic sizes that ops require to be equal ------------------------------
# Before these guards, operands of different run-time sizes were read with the first one's
# loop bounds: `add` of slices of 16 and 2 elements summed 14 values from past the second.

def _slices(rank: int) -> str:
    """@main's head: %a and %b, slices [0, limit) of %x and %y (16 ones, 16 twos per axis)."""
    shape = "x".join(["16"] * rank) + "xf32"
    dyn = "x".join(["?"] * rank) + "xf32"
    idx = f"tensor<{rank}xi64>"
    return (f"func.func @main(%x: tensor<{shape}>, %y: tensor<{shape}>, %la: {idx}, %lb: {idx}"
            f") -> tensor<f32> {{\n"
            f"  %s = stablehlo.constant dense<0> : {idx}\n"
            f"  %t = stablehlo.constant dense<1> : {idx}\n"
            f"  %a = stablehlo.real_dynamic_slice %x, %s, %la, %t : (tensor<{shape}>, {idx}, "
            f"{idx}, {idx}) -> tensor<{dyn}>\n"
            f"  %b = stablehlo.real_dynamic_slice %y, %s, %lb, %t : (tensor<{shape}>, {idx}, "
            f"{idx}, {idx}) -> tensor<{dyn}>\n")


def _total(value: str, ttype: str, rank: int) -> str:
    dims = ", ".join(str(d) for d in range(rank))
    return ("  %z = stablehlo.constant dense<0.0> : tensor<f32>\n"
            f"  %sum = stablehlo.reduce({value} init: %z) applies stablehlo.add across dimensions ="
            f" [{dims}] : ({ttype}, tensor<f32>) -> tensor<f32>\n  return %sum : tensor<f32>\n}}")


def _agreement_args(rank: int, la: list[int], lb: list[int]) -> list[np.ndarray]:
    shape = (16,) * rank
    return [np.ones(shape, np.float32), np.full(shape, 2, np.float32), np.array(la), np.array(lb)]


ADD = (_slices(1) + "  %r = stablehlo.add %a, %b : tensor<?xf32>\n" +
       _total("%r", "tensor<?xf32>", 1))
SELECT = (_slices(1) + "  %p = stablehlo.constant dense<true> : tensor<i1>\n"
          "  %r = stablehlo.select %p, %a, %b : (tensor<i1>, tensor<?xf32>, tensor<?xf32>) -> "
          "tensor<?xf32>\n" + _total("%r", "tensor<?xf32>", 1))
DOT = (_slices(1) + "  %r = stablehlo.dot_general %a, %b, contracting_dims = [0] x [0] : "
       "(tensor<?xf32>, tensor<?xf32>) -> tensor<f32>\n  return %r : tensor<f32>\n}")
CONCATENATE = (_slices(2) + "  %r = stablehlo.concatenate %a, %b, dim = 0 : (tensor<?x?xf32>, "
               "tensor<?x?xf32>) -> tensor<?x?xf32>\n" + _total("%r", "tensor<?x?xf32>", 2))
STATIC_RESULT = (_slices(1) + "  %r = stablehlo.multiply %a, %b : (tensor<?xf32>, tensor<?xf32>)"
                 " -> tensor<4xf32>\n" + _total("%r", "tensor<4xf32>", 1))


@pytest.mark.parametrize("source, la, lb, want, what", [
    (ADD, [16], [16], 48.0, None),
    (ADD, [16], [2], None, "dimension 0 of operand 0, dimension 0 of operand 1 must be equal"),
    (ADD, [2], [16], None, "dimension 0 of operand 0, dimension 0 of operand 1 must be equal"),
    (ADD, [0], [1], None, "dimension 0 of operand 0"),
    (SELECT, [5], [5], 5.0, None),
    (SELECT, [16], [3], None, "dimension 0 of operand 1, dimension 0 of operand 2"),
    (DOT, [7], [7], 14.0, None),
    (DOT, [16], [1], None, "dimension 0 of lhs, dimension 0 of rhs must be equal"),
    (CONCATENATE, [3, 4], [5, 4], 3 * 4 + 2 * 5 * 4, None),   # the axis may differ
    (CONCATENATE, [3, 16], [5, 4], None, "dimension 1 of operand 0, dimension 1 of operand 1"),
    (STATIC_RESULT, [4], [4], 8.0, None),
    (STATIC_RESULT, [16], [16], None, "dimension 0 of result must be equal"),
    (STATIC_RESULT, [4], [3], None, "dimension 0 of operand 1, dimension 0 of result"),
])
def test_run_time_sizes_must_agree(source, la, lb, want, what):
    rank = len(la)
    outcome = _isolated(source, _agreement_args(rank, la, lb))
    if want is not None:
        assert outcome.get("result") == [want], outcome
        return
    assert outcome.get("error") == "KilnError", outcome
    line = 6 if source is not SELECT else 7   # the op's line in the source, named in the error
    op = {ADD: "add", SELECT: "select", DOT: "dot_general", CONCATENATE: "concatenate",
          STATIC_RESULT: "multiply"}[source]
    assert f"<string>:{line}:8: stablehlo.{op}: run-time sizes disagree" in outcome["message"]
    assert what in outcome["message"], outcome


def test_concatenate_axis_must_add_up_to_a_static_result():
    source = (_slices(1) + "  %r = stablehlo.concatenate %a, %b, dim = 0 : (tensor<?xf32>, "
              "tensor<?xf32>) -> tensor<6xf32>\n" + _total("%r", "tensor<6xf32>", 1))
    exe = kiln.compile(source)
    assert exe(*_agreement_args(1, [4], [2]))[0] == 4 + 2 * 2
    assert exe(*_agreement_args(1, [1], [5]))[0] == 1 + 2 * 5
    with pytest.raises(kiln.KilnError, match="concatenate: .*must add up to the result's 6"):
        exe(*_agreement_args(1, [4], [4]))


def test_static_programs_get_no_agreement_guards():
    """All sizes static: the verifier has checked them, and the pass leaves the IR as it was
    (no run-time cost)."""
    from torch_mlir import ir
    from kiln.context import make_context
    from kiln.frontend import import_module
    from kiln.lowering.bounds_guards import guard_run_time_shapes
    source = (
        "func.func @main(%x: tensor<4x3xf32>, %y: tensor<2x3xf32>, %p: tensor<i1>) -> "
        "tensor<6x6xf32> {\n"
        "  %c = stablehlo.concatenate %x, %y, dim = 0 : (tensor<4x3xf32>, tensor<2x3xf32>) -> "
        "tensor<6x3xf32>\n"
        "  %a = stablehlo.add %c, %c : tensor<6x3xf32>\n"
        "  %s = stablehlo.select %p, %a, %c : (tensor<i1>, tensor<6x3xf32>, tensor<6x3xf32>) -> "
        "tensor<6x3xf32>\n"
        "  %t = stablehlo.transpose %s, dims = [1, 0] : (tensor<6x3xf32>) -> tensor<3x6xf32>\n"
        "  %d = stablehlo.dot_general %s, %t, contracting_dims = [1] x [0] : (tensor<6x3xf32>, "
        "tensor<3x6xf32>) -> tensor<6x6xf32>\n  return %d : tensor<6x6xf32>\n}")
    ctx = make_context()
    module, _ = import_module(source, ctx, "static.mlir")
    before = str(module)
    with ctx, ir.Location.unknown():
        guard_run_time_shapes(module)
    assert str(module) == before
    exe = kiln.compile(source)
    assert "kiln_runtime_check_failed" not in exe.ir("legalize")
    x, y = np.ones((4, 3), np.float32), np.full((2, 3), 2, np.float32)
    c = np.concatenate([x, y])
    np.testing.assert_allclose(exe(x, y, np.array(True))[0], (2 * c) @ (2 * c).T)


@pytest.mark.parametrize("limit, ok", [(16, True), (8, True), (7, False), (0, False)])
def test_static_slice_of_a_dynamic_operand_stays_inside_it(limit, ok):
    source = (_slices(1) + "  %r = stablehlo.slice %a [0:8] : (tensor<?xf32>) -> tensor<8xf32>\n"
              + _total("%r", "tensor<8xf32>", 1))
    outcome = _isolated(source, _agreement_args(1, [limit], [16]))
    if ok:
        assert outcome.get("result") == [8.0], outcome
    else:
        assert outcome.get("error") == "KilnError", outcome
        assert "<string>:6:8: stablehlo.slice: limit_indices past the operand's run-time size" \
            in outcome["message"], outcome


# ---- zero-element run-time shapes do no work (fuzz finding F5) ------------------------------
# A value of run-time shape [a, 0] has no elements, yet the loop over `a` used to run: with
# a = 2^31 - 1 the sum below took 71 s, with a = 2^62 it never ended. The calls run in a
# child process under a timeout, so a regression fails instead of hanging the suite.
_EMPTY_SUM = (
    "func.func @main(%a: tensor<i64>, %b: tensor<i64>, %x: tensor<f32>) -> tensor<f32> {\n"
    "  %a1 = stablehlo.reshape %a : (tensor<i64>) -> tensor<1xi64>\n"
    "  %b1 = stablehlo.reshape %b : (tensor<i64>) -> tensor<1xi64>\n"
    "  %s = stablehlo.concatenate %a1, %b1, dim = 0 : (tensor<1xi64>, tensor<1xi64>) -> tensor<2xi64>\n"
    "  %i = stablehlo.dynamic_iota %s, dim = 0 : (tensor<2xi64>) -> tensor<?x?xf32>\n"
    "  %x2 = stablehlo.dynamic_broadcast_in_dim %x, %s, dims = [] : (tensor<f32>, tensor<2xi64>) "
    "-> tensor<?x?xf32>\n"
    "  %m = stablehlo.multiply %i, %x2 : tensor<?x?xf32>\n"
    "  %t = stablehlo.transpose %m, dims = [1, 0] : (tensor<?x?xf32>) -> tensor<?x?xf32>\n"
    "  %z = stablehlo.constant dense<0.0> : tensor<f32>\n"
    "  %r = stablehlo.reduce(%t init: %z) applies stablehlo.add across dimensions = [0, 1]"
    " : (tensor<?x?xf32>, tensor<f32>) -> tensor<f32>\n"
    "  return %r : tensor<f32>\n}")


def _timed_calls(source: str, calls: list[tuple[int, int]], limit_s: int = 120) -> list:
    """[(result, seconds)] of each call of `source` with (a, b, 2.0), in a child process."""
    script = textwrap.dedent("""
        import json, sys, time, numpy as np, kiln
        source, calls = json.loads(sys.stdin.read())
        exe = kiln.compile(source)
        out = []
        for a, b in calls:
            start = time.perf_counter()
            (r,) = exe(np.int64(a), np.int64(b), np.float32(2.0))
            out.append([float(r), time.perf_counter() - start])
        print(json.dumps(out))
    """)
    done = subprocess.run([sys.executable, "-c", script], input=json.dumps([source, calls]),
                          capture_output=True, text=True, timeout=limit_s)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_zero_element_run_time_shapes_with_a_huge_dimension_do_no_work():
    calls = [(3, 4), ((1 << 31) - 1, 0), (0, (1 << 31) - 1), (1 << 62, 0), (0, 1 << 62)]
    got = _timed_calls(_EMPTY_SUM, calls)
    # [3, 4]: 2 * (0 + 1 + 2) * 4 = 24; every other shape is empty, its sum the init 0.
    assert [r for r, _ in got] == [24.0, 0.0, 0.0, 0.0, 0.0]
    # Each empty call is a few compares; 1 s is far above that and far below the loops.
    assert all(seconds < 1.0 for _, seconds in got[1:]), got


def test_a_huge_non_empty_run_time_shape_is_still_refused():
    """Only a size of 0 exempts a shape from the byte-count guard: [2^62, 2^62] is refused."""
    exe = kiln.compile(_EMPTY_SUM)
    with pytest.raises(kiln.KilnError, match="dynamic_iota.*byte count would not fit"):
        exe(np.int64(1 << 62), np.int64(1 << 62), np.float32(2.0))
    assert exe(np.int64(1 << 62), np.int64(0), np.float32(2.0))[0] == 0.0


def test_csr_row_pointers_near_the_int64_minimum_are_refused():
    # np.diff of [0, 2, 3, -2**63 + 1] wraps to a positive step: a diff-only check let it
    # through and scipy read outside the values (SIGSEGV; generated-program fuzz, seed 2027).
    from kiln.errors import CustomCallError
    from kiln.runtime import sparse
    indptr = np.array([0, 2, 3, -2**63 + 1], np.int64)
    with pytest.raises(CustomCallError, match="row pointers must start at 0"):
        sparse.validate(np.ones(3, np.float32), indptr, np.zeros(3, np.int64),
                        np.ones((3, 1), np.float32), np.zeros((3, 1), np.float32))
