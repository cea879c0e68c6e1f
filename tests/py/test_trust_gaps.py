"""Untrusted programs, remaining gaps of issue 25 (class 3 and small ones).

Run-time shape agreement for ops whose sizes the spec ties together where an operand is
dynamic (`?`): before these guards each program below read or wrote outside a buffer (a
multi-input reduce summed past its shorter input, a pad of a too-long operand corrupted the
heap) or silently computed with the wrong sizes. Every call runs in a child process
(test_runtime_bounds._isolated), so a regression shows as the signal, not a dead run.
"""
from __future__ import annotations

import numpy as np
import pytest

import kiln
from test_runtime_bounds import _isolated


def _program(result: str, body: str) -> str:
    """@main(%x: 16 ones, %y: 16 twos, %la, %lb): %a = %x[0:la], %b = %y[0:lb], both
    tensor<?xf32>, then `body`, which returns `result`."""
    idx = "tensor<1xi64>"
    return (f"func.func @main(%x: tensor<16xf32>, %y: tensor<16xf32>, %la: {idx}, %lb: {idx})"
            f" -> {result} {{\n"
            f"  %s = stablehlo.constant dense<0> : {idx}\n"
            f"  %t = stablehlo.constant dense<1> : {idx}\n"
            f"  %a = stablehlo.real_dynamic_slice %x, %s, %la, %t : (tensor<16xf32>, {idx}, "
            f"{idx}, {idx}) -> tensor<?xf32>\n"
            f"  %b = stablehlo.real_dynamic_slice %y, %s, %lb, %t : (tensor<16xf32>, {idx}, "
            f"{idx}, {idx}) -> tensor<?xf32>\n"
            f"  %z = stablehlo.constant dense<0.0> : tensor<f32>\n" + body + "}")


def _sum(value: str, ttype: str, rank: int) -> str:
    dims = ", ".join(str(d) for d in range(rank))
    return (f"  %sum = stablehlo.reduce({value} init: %z) applies stablehlo.add across dimensions"
            f" = [{dims}] : ({ttype}, tensor<f32>) -> tensor<f32>\n"
            "  return %sum : tensor<f32>\n")


def _args(la: int, lb: int) -> list[np.ndarray]:
    return [np.ones(16, np.float32), np.full(16, 2, np.float32), np.array([la]), np.array([lb])]


def _outcome(source: str, la: int, lb: int, want, what: str | None, op: str, line: int = 7):
    outcome = _isolated(source, _args(la, lb))
    if what is None:
        assert outcome.get("result") == want, outcome
        return
    assert outcome.get("error") == "KilnError", outcome
    assert f"<string>:{line}:" in outcome["message"] and f"stablehlo.{op}" in outcome["message"]
    assert what in outcome["message"], outcome


# ---- gap 1: shape agreement and sizes that must fit, with dynamic operands ------------------

REDUCE_TWO = _program("(tensor<f32>, tensor<f32>)", (
    "  %r:2 = stablehlo.reduce(%a init: %z), (%b init: %z) across dimensions = [0] : "
    "(tensor<?xf32>, tensor<?xf32>, tensor<f32>, tensor<f32>) -> (tensor<f32>, tensor<f32>)\n"
    "   reducer(%p: tensor<f32>, %u: tensor<f32>) (%q: tensor<f32>, %v: tensor<f32>) {\n"
    "    %0 = stablehlo.add %p, %u : tensor<f32>\n"
    "    %1 = stablehlo.add %q, %v : tensor<f32>\n"
    "    stablehlo.return %0, %1 : tensor<f32>, tensor<f32>\n  }\n"
    "  return %r#0, %r#1 : tensor<f32>, tensor<f32>\n"))
BROADCAST = _program("tensor<f32>", (
    "  %r = stablehlo.broadcast_in_dim %a, dims = [1] : (tensor<?xf32>) -> tensor<4x8xf32>\n"
    + _sum("%r", "tensor<4x8xf32>", 2)))
RESHAPE = _program("tensor<f32>", (
    "  %r = stablehlo.reshape %a : (tensor<?xf32>) -> tensor<2x4xf32>\n"
    + _sum("%r", "tensor<2x4xf32>", 2)))
PAD = _program("tensor<f32>", (
    "  %r = stablehlo.pad %a, %z, low = [1], high = [1], interior = [0] : (tensor<?xf32>, "
    "tensor<f32>) -> tensor<10xf32>\n" + _sum("%r", "tensor<10xf32>", 1)))
# negative low padding and interior padding: 8 elements give -1 + 8 + 7 + 2 = 16
PAD_INTERIOR = _program("tensor<f32>", (
    "  %r = stablehlo.pad %a, %z, low = [-1], high = [2], interior = [1] : (tensor<?xf32>, "
    "tensor<f32>) -> tensor<16xf32>\n" + _sum("%r", "tensor<16xf32>", 1)))
REDUCE_WINDOW = _program("tensor<f32>", (
    "  %r = \"stablehlo.reduce_window\"(%a, %z) ({\n"
    "  ^bb0(%p: tensor<f32>, %q: tensor<f32>):\n"
    "    %0 = stablehlo.add %p, %q : tensor<f32>\n    stablehlo.return %0 : tensor<f32>\n"
    "  }) {window_dimensions = array<i64: 2>, window_strides = array<i64: 2>} : "
    "(tensor<?xf32>, tensor<f32>) -> tensor<4xf32>\n" + _sum("%r", "tensor<4xf32>", 1)))
# operand 16 elements, update %b: at most 16, placed at the start
UPDATE = _program("tensor<f32>", (
    "  %i = stablehlo.constant dense<0> : tensor<i64>\n"
    "  %r = stablehlo.dynamic_update_slice %x, %b, %i : (tensor<16xf32>, tensor<?xf32>, "
    "tensor<i64>) -> tensor<16xf32>\n" + _sum("%r", "tensor<16xf32>", 1)))
# The predicate and index are computed at run time (a constant one folds the if away):
# %la != 0 picks %a, else %b.
IF = _program("tensor<f32>", (
    "  %zero = stablehlo.constant dense<0> : tensor<1xi64>\n"
    "  %p1 = stablehlo.compare NE, %la, %zero : (tensor<1xi64>, tensor<1xi64>) -> tensor<1xi1>\n"
    "  %p = stablehlo.reshape %p1 : (tensor<1xi1>) -> tensor<i1>\n"
    "  %r = \"stablehlo.if\"(%p) ({\n    stablehlo.return %a : tensor<?xf32>\n  }, {\n"
    "    stablehlo.return %b : tensor<?xf32>\n  }) : (tensor<i1>) -> tensor<8xf32>\n"
    + _sum("%r", "tensor<8xf32>", 1)))
# index %la: 0 picks %a, any other (out of range: the last branch) %b
CASE = _program("tensor<f32>", (
    "  %k1 = stablehlo.reshape %la : (tensor<1xi64>) -> tensor<i64>\n"
    "  %k = stablehlo.convert %k1 : (tensor<i64>) -> tensor<i32>\n"
    "  %r = \"stablehlo.case\"(%k) ({\n    stablehlo.return %a : tensor<?xf32>\n  }, {\n"
    "    stablehlo.return %b : tensor<?xf32>\n  }) : (tensor<i32>) -> tensor<8xf32>\n"
    + _sum("%r", "tensor<8xf32>", 1)))
# the body returns a dynamic value for the static carried tensor<8xf32>
WHILE = _program("tensor<f32>", (
    "  %c = stablehlo.constant dense<3> : tensor<i64>\n"
    "  %n = stablehlo.constant dense<0> : tensor<i64>\n"
    "  %x8 = stablehlo.slice %x [0:8] : (tensor<16xf32>) -> tensor<8xf32>\n"
    "  %r:2 = stablehlo.while(%i = %n, %v = %x8) : tensor<i64>, tensor<8xf32>\n"
    "   cond {\n"
    "    %k = stablehlo.compare LT, %i, %c : (tensor<i64>, tensor<i64>) -> tensor<i1>\n"
    "    stablehlo.return %k : tensor<i1>\n  } do {\n"
    "    %one = stablehlo.constant dense<1> : tensor<i64>\n"
    "    %j = stablehlo.add %i, %one : tensor<i64>\n"
    "    %w = stablehlo.concatenate %b, %b, dim = 0 : (tensor<?xf32>, tensor<?xf32>) -> "
    "tensor<?xf32>\n"
    "    stablehlo.return %j, %w : tensor<i64>, tensor<?xf32>\n  }\n"
    + _sum("%r#1", "tensor<8xf32>", 1)))
# lhs [batch 1, width 1, features la] with a kernel of 2 input features, 3 output features
CONVOLUTION = _program("tensor<f32>", (
    "  %x3 = stablehlo.reshape %x : (tensor<16xf32>) -> tensor<1x1x16xf32>\n"
    "  %ones = stablehlo.constant dense<1> : tensor<2xi64>\n"
    "  %lim = stablehlo.concatenate %ones, %la, dim = 0 : (tensor<2xi64>, tensor<1xi64>) -> "
    "tensor<3xi64>\n"
    "  %s3 = stablehlo.constant dense<0> : tensor<3xi64>\n"
    "  %t3 = stablehlo.constant dense<1> : tensor<3xi64>\n"
    "  %l = stablehlo.real_dynamic_slice %x3, %s3, %lim, %t3 : (tensor<1x1x16xf32>, "
    "tensor<3xi64>, tensor<3xi64>, tensor<3xi64>) -> tensor<1x1x?xf32>\n"
    "  %k = stablehlo.constant dense<1.0> : tensor<1x2x3xf32>\n"
    "  %r = stablehlo.convolution(%l, %k) dim_numbers = [b, 0, f]x[0, i, o]->[b, 0, f], "
    "window = {} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : "
    "(tensor<1x1x?xf32>, tensor<1x2x3xf32>) -> tensor<1x1x3xf32>\n"
    + _sum("%r", "tensor<1x1x3xf32>", 3)))

# lhs [batch 1, width la, features 1], a window of 3: the result's width 6 needs la = 8
CONVOLUTION_WIDTH = _program("tensor<f32>", (
    "  %x3 = stablehlo.reshape %x : (tensor<16xf32>) -> tensor<1x16x1xf32>\n"
    "  %one = stablehlo.constant dense<1> : tensor<1xi64>\n"
    "  %lim = stablehlo.concatenate %one, %la, %one, dim = 0 : (tensor<1xi64>, tensor<1xi64>, "
    "tensor<1xi64>) -> tensor<3xi64>\n"
    "  %s3 = stablehlo.constant dense<0> : tensor<3xi64>\n"
    "  %t3 = stablehlo.constant dense<1> : tensor<3xi64>\n"
    "  %l = stablehlo.real_dynamic_slice %x3, %s3, %lim, %t3 : (tensor<1x16x1xf32>, "
    "tensor<3xi64>, tensor<3xi64>, tensor<3xi64>) -> tensor<1x?x1xf32>\n"
    "  %k = stablehlo.constant dense<1.0> : tensor<3x1x1xf32>\n"
    "  %r = stablehlo.convolution(%l, %k) dim_numbers = [b, 0, f]x[0, i, o]->[b, 0, f], "
    "window = {} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : "
    "(tensor<1x?x1xf32>, tensor<3x1x1xf32>) -> tensor<1x6x1xf32>\n"
    + _sum("%r", "tensor<1x6x1xf32>", 3)))


@pytest.mark.parametrize("la, lb, want", [(8, 8, [8.0, 16.0]), (0, 0, [0.0, 0.0])])
def test_reduce_of_two_inputs_that_agree(la, lb, want):
    _outcome(REDUCE_TWO, la, lb, want, None, "reduce")


@pytest.mark.parametrize("la, lb", [(16, 2), (2, 16), (0, 1)])
def test_reduce_of_two_inputs_that_disagree(la, lb):
    # before: input 1 was read with input 0's length (16 twos summed from a 2-element slice)
    outcome = _isolated(REDUCE_TWO, _args(la, lb))
    assert outcome.get("error") == "KilnError", outcome
    assert ("<string>:7:26: stablehlo.reduce: run-time sizes disagree: dimension 0 of input 0, "
            "dimension 0 of input 1 must be equal") in outcome["message"], outcome


_FIT = [
    # (program, la, lb, result or None, what the error says, op)
    (BROADCAST, 8, 0, [32.0], None, "broadcast_in_dim"),
    (BROADCAST, 1, 0, [32.0], None, "broadcast_in_dim"),   # a size of 1 is broadcast
    (BROADCAST, 16, 0, None, "neither 1 nor the result dimension", "broadcast_in_dim"),
    (BROADCAST, 2, 0, None, "neither 1 nor the result dimension", "broadcast_in_dim"),
    (RESHAPE, 8, 0, [8.0], None, "reshape"),
    (RESHAPE, 16, 0, None, "element count differs from the result's 8", "reshape"),
    (RESHAPE, 2, 0, None, "element count differs from the result's 8", "reshape"),
    (PAD, 8, 0, [8.0], None, "pad"),
    (PAD, 16, 0, None, "does not give the result's static size", "pad"),   # heap corruption
    (PAD, 2, 0, None, "does not give the result's static size", "pad"),
    (PAD_INTERIOR, 8, 0, [7.0], None, "pad"),
    (PAD_INTERIOR, 2, 0, None, "does not give the result's static size", "pad"),  # NaN read
    (REDUCE_WINDOW, 8, 0, [8.0], None, "reduce_window"),
    (REDUCE_WINDOW, 9, 0, [8.0], None, "reduce_window"),   # floor((9 - 2) / 2) + 1 = 4
    (REDUCE_WINDOW, 16, 0, None, "window formula", "reduce_window"),
    (REDUCE_WINDOW, 2, 0, None, "window formula", "reduce_window"),
    (CONVOLUTION, 2, 0, [6.0], None, "convolution"),
    (CONVOLUTION, 4, 0, None, "feature dimension must be the kernel's input feature", "convolution"),
    (CONVOLUTION, 1, 0, None, "feature dimension must be the kernel's input feature", "convolution"),
    (CONVOLUTION_WIDTH, 8, 0, [18.0], None, "convolution"),
    (CONVOLUTION_WIDTH, 9, 0, None, "do not give the result's static shape", "convolution"),
    (CONVOLUTION_WIDTH, 2, 0, None, "do not give the result's static shape", "convolution"),
]


@pytest.mark.parametrize("source, la, lb, want, what, op", _FIT)
def test_dynamic_operand_must_fit_a_static_result(source, la, lb, want, what, op):
    line = 14 if source in (CONVOLUTION, CONVOLUTION_WIDTH) else 7
    _outcome(source, la, lb, want, what, op, line)


@pytest.mark.parametrize("lb", [4, 16, 17])
def test_dynamic_update_slice_of_dynamic_sizes_is_refused_at_compile_time(lb):
    """Already safe: Kiln lowers dynamic_update_slice only with static shapes; with a dynamic
    update (here up to 16 elements into 16) it is a located compile error, whatever runs."""
    outcome = _isolated(UPDATE, _args(0, min(lb, 16)))
    assert outcome.get("error") == "KilnError", outcome
    assert outcome["message"].startswith("<string>:8:8: Kiln cannot lower "
                                         "'stablehlo.dynamic_update_slice'"), outcome


DYNAMIC_RESHAPE = _program("tensor<f32>", (
    "  %sh = stablehlo.concatenate %lb, %lb, dim = 0 : (tensor<1xi64>, tensor<1xi64>) -> "
    "tensor<2xi64>\n"
    "  %r = stablehlo.dynamic_reshape %a, %sh : (tensor<?xf32>, tensor<2xi64>) -> "
    "tensor<2x2xf32>\n" + _sum("%r", "tensor<2x2xf32>", 2)))


@pytest.mark.parametrize("la, lb", [(4, 2), (8, 2), (4, 3)])
def test_dynamic_reshape_with_a_run_time_shape_is_refused_at_compile_time(la, lb):
    """Already safe: a dynamic_reshape whose shape is not a constant is a located compile
    error, whatever sizes the call would have (2x2 of 4 elements included)."""
    outcome = _isolated(DYNAMIC_RESHAPE, _args(la, lb))
    assert outcome.get("error") == "KilnError", outcome
    assert outcome["message"].startswith("<string>:8:8: Kiln cannot lower "
                                         "'stablehlo.dynamic_reshape'"), outcome


@pytest.mark.parametrize("source, la, lb, want", [
    (IF, 8, 3, [8.0]), (IF, 0, 8, [16.0]), (CASE, 3, 8, [16.0]),
    (WHILE, 0, 4, [16.0])])
def test_region_results_of_the_declared_size(source, la, lb, want):
    # before: scf refused the lowered region (its yield's type differs from the result's)
    _outcome(source, la, lb, want, None, "")


@pytest.mark.parametrize("source, la, lb, op, line", [
    (IF, 16, 8, "if", 10), (IF, 2, 8, "if", 10), (IF, 0, 3, "if", 10), (CASE, 8, 3, "case", 9),
    (CASE, 0, 8, "case", 9),
    (WHILE, 0, 3, "while", 10)])
def test_region_results_of_another_size(source, la, lb, op, line):
    _outcome(source, la, lb, None, "a region result's run-time shape differs from the declared "
             "type", op, line)


STATIC = """func.func @main(%x: tensor<8xf32>, %y: tensor<8xf32>, %p: tensor<i1>) -> tensor<f32> {
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %r:2 = stablehlo.reduce(%x init: %z), (%y init: %z) across dimensions = [0] :
      (tensor<8xf32>, tensor<8xf32>, tensor<f32>, tensor<f32>) -> (tensor<f32>, tensor<f32>)
   reducer(%a: tensor<f32>, %u: tensor<f32>) (%b: tensor<f32>, %v: tensor<f32>) {
    %0 = stablehlo.add %a, %u : tensor<f32>
    %1 = stablehlo.add %b, %v : tensor<f32>
    stablehlo.return %0, %1 : tensor<f32>, tensor<f32>
  }
  %bc = stablehlo.broadcast_in_dim %x, dims = [1] : (tensor<8xf32>) -> tensor<2x8xf32>
  %rs = stablehlo.reshape %bc : (tensor<2x8xf32>) -> tensor<16xf32>
  %pd = stablehlo.pad %rs, %z, low = [1], high = [1], interior = [0] :
      (tensor<16xf32>, tensor<f32>) -> tensor<18xf32>
  %w = "stablehlo.reduce_window"(%pd, %z) ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %0 = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %0 : tensor<f32>
  }) {window_dimensions = array<i64: 2>, window_strides = array<i64: 2>} :
      (tensor<18xf32>, tensor<f32>) -> tensor<9xf32>
  %l = stablehlo.reshape %w : (tensor<9xf32>) -> tensor<1x9x1xf32>
  %k = stablehlo.constant dense<1.0> : tensor<3x1x1xf32>
  %c = stablehlo.convolution(%l, %k) dim_numbers = [b, 0, f]x[0, i, o]->[b, 0, f], window = {}
      {batch_group_count = 1 : i64, feature_group_count = 1 : i64} :
      (tensor<1x9x1xf32>, tensor<3x1x1xf32>) -> tensor<1x7x1xf32>
  %i = "stablehlo.if"(%p) ({
    stablehlo.return %c : tensor<1x7x1xf32>
  }, {
    stablehlo.return %c : tensor<1x7x1xf32>
  }) : (tensor<i1>) -> tensor<1x7x1xf32>
  %s = stablehlo.reduce(%i init: %r#0) applies stablehlo.add across dimensions = [0, 1, 2] :
      (tensor<1x7x1xf32>, tensor<f32>) -> tensor<f32>
  %t = stablehlo.add %s, %r#1 : tensor<f32>
  return %t : tensor<f32>
}"""


def test_static_programs_get_none_of_these_guards():
    """All sizes static: the verifiers checked them, the pass leaves the IR as it was."""
    from torch_mlir import ir
    from kiln.context import make_context
    from kiln.frontend import import_module
    from kiln.lowering.bounds_guards import guard_run_time_shapes
    ctx = make_context()
    module, _ = import_module(STATIC, ctx, "static.mlir")
    before = str(module)
    with ctx, ir.Location.unknown():
        guard_run_time_shapes(module)
    assert str(module) == before
    exe = kiln.compile(STATIC)
    assert "kiln_runtime_check_failed" not in exe.ir("legalize")
    x, y = np.arange(8, dtype=np.float32), np.ones(8, np.float32)
    padded = np.pad(np.tile(x, 2), 1)
    windows = padded.reshape(9, 2).sum(axis=1)
    conv = np.convolve(windows, np.ones(3), mode="valid")
    (got,) = exe(x, y, np.array(True))
    assert got == pytest.approx(x.sum() + conv.sum() + y.sum())


# ---- gap 2: types by allowlist ----------------------------------------------------------------

def _private_helper(arg_type: str) -> str:
    """A private function taking `arg_type`, never called: MLIR parses it, no entry check
    sees it, and it used to reach the lowering."""
    return ("func.func private @helper(%p: " + arg_type + ") {\n  return\n}\n"
            "func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {\n"
            "  return %x : tensor<2xf32>\n}")


@pytest.mark.parametrize("vtype", [
    "!llvm.ptr", "memref<4xf32>", "index", "i32", "f32", "vector<4xf32>", "tensor<4xindex>",
    "tensor<4xvector<4xf32>>", "tensor<4x!llvm.ptr>", "tensor<4xsi32>", "tensor<*xf32>",
    "tensor<4xf32, #sparse_tensor.encoding<{map = (d0) -> (d0 : compressed)}>>",
    "tuple<tensor<2xf32>, memref<2xf32>>", "complex<f32>", "tensor<4xcomplex<i32>>",
])
def test_a_value_type_an_xla_program_cannot_hold_is_refused(vtype):
    with pytest.raises(kiln.KilnError) as info:
        kiln.compile(_private_helper(vtype), filename="helper.mlir")
    message = str(info.value)
    assert message.startswith("helper.mlir:1:1: argument 0 of @helper has type "), message
    assert "which an XLA program cannot hold" in message


def test_a_result_type_is_checked_too():
    # func.call may return any type: a function without arguments returning an index
    source = ("func.func private @helper() -> index {\n"
              "  %0 = func.call @helper() : () -> index\n  return %0 : index\n}\n"
              "func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {\n"
              "  return %x : tensor<2xf32>\n}")
    with pytest.raises(kiln.KilnError) as info:
        kiln.compile(source, filename="call.mlir")
    assert str(info.value).startswith("call.mlir:2:8: result 0 of 'func.call' has type index, "
                                      "which an XLA program cannot hold"), str(info.value)


@pytest.mark.parametrize("vtype", [
    "tensor<2x3xf32>", "tensor<?xi1>", "tensor<4xui8>", "tensor<2xi4>", "tensor<bf16>",
    "tensor<2xf8E4M3FN>", "tensor<2xcomplex<f64>>", "!stablehlo.token",
    "tuple<tensor<2xf32>, tuple<!stablehlo.token, tensor<ui64>>>",
    "tensor<?xf32, #stablehlo.bounds<4>>", "tensor<2x!quant.uniform<i8:f32, 0.5:1>>",
])
def test_xla_types_are_allowed(vtype):
    from torch_mlir import ir
    from kiln.context import make_context
    from kiln.lowering.type_allowlist import type_allowed
    with make_context():
        assert type_allowed(ir.Type.parse(vtype))


# ---- gap 3: HLO all-to-all without replica_groups ------------------------------------------
# XLA's "no replica_groups" means every device in one group. It was emitted as an empty group
# list, on which StableHLO's verifier divides by zero: SIGFPE in the reader.

_ALL_TO_ALL = """HloModule m{header}

ENTRY e {{
  p = f32[4] parameter(0)
  q = f32[4] parameter(1)
  ROOT a = {op}
}}
"""


@pytest.mark.parametrize("groups", ["", ", replica_groups={}", ", replica_groups={{0}}"])
def test_array_all_to_all_without_groups_runs(tmp_path, groups):
    path = tmp_path / "a2a.hlo"
    path.write_text(_ALL_TO_ALL.format(header="", op=f"f32[4] all-to-all(p), dimensions={{0}}"
                                       + groups))
    x = np.arange(4, dtype=np.float32)
    (got,) = kiln.compile(str(path))(x, x + 1)
    np.testing.assert_array_equal(got, x)   # one device: all-to-all keeps the data


def test_tuple_all_to_all_without_groups_is_a_located_error(tmp_path):
    path = tmp_path / "a2a.hlo"
    path.write_text(_ALL_TO_ALL.format(header="", op="(f32[4], f32[4]) all-to-all(p, q)"))
    with pytest.raises(kiln.KilnError) as info:
        kiln.compile(str(path))
    assert str(info.value).startswith(f"{path}:6:10: replica group [0, 1] names id 1, outside "
                                      "the program's 1 replica(s)"), str(info.value)


def test_all_to_all_without_groups_is_one_group_of_every_device():
    """Two replicas, no groups: one group of both, as XLA reads it (the emitted StableHLO)."""
    from kiln.frontend.hlo import hlo_to_stablehlo
    text = hlo_to_stablehlo(_ALL_TO_ALL.format(header=", replica_count=2",
                                               op="(f32[4], f32[4]) all-to-all(p, q)"))
    assert "replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>" in text, text



@pytest.mark.parametrize("groups", ["dense<> : tensor<0x0xi64>", "dense<> : tensor<0x2xi64>"])
def test_mlir_all_to_all_with_no_groups_is_refused_before_parsing(groups):
    """StableHLO's verifier divides by the number of groups: parsed in the caller (kiln-opt,
    kiln.load, isolate=False), zero groups ended the process with SIGFPE."""
    import subprocess
    import sys
    source = ('func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {\n'
              '  %0 = "stablehlo.all_to_all"(%x) {split_dimension = 0 : i64, '
              'concat_dimension = 0 : i64, split_count = 2 : i64, '
              f'replica_groups = {groups}}} : (tensor<4xf32>) -> tensor<4xf32>\n'
              '  return %0 : tensor<4xf32>\n}\n')
    probe = ("import kiln, sys\n"
             "try:\n    kiln.compile(sys.stdin.read(), isolate=False)\n"
             "except kiln.KilnError as e:\n    print(e.location, e.message)\n")
    done = subprocess.run([sys.executable, "-c", probe], input=source, text=True,
                          capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "<string>:2:" in done.stdout and "has no groups" in done.stdout, done.stdout

@pytest.mark.parametrize("layout", ["[b, 4294967296, 1, f]x[0, 1, i, o]->[b, 0, 1, f]",
                                    "[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 9223372036854775807, f]"])
def test_convolution_spatial_dimension_past_the_layout_is_refused_before_parsing(layout):
    """StableHLO's parser made room for spatial dimension N up front: N = 2^32 aborted the
    parsing process (SmallVector unable to grow), found by the mutation fuzzer. Refused
    before the parse, so this runs in the test's own process (isolate=False)."""
    source = ("func.func @main(%x: tensor<1x4x4x1xf32>, %w: tensor<3x3x1x1xf32>) -> "
              "tensor<1x2x2x1xf32> {\n"
              f"  %r = stablehlo.convolution(%x, %w) dim_numbers = {layout}, "
              "window = {stride = [2, 2]} {batch_group_count = 1 : i64, "
              "feature_group_count = 1 : i64} : (tensor<1x4x4x1xf32>, tensor<3x3x1x1xf32>) -> "
              "tensor<1x2x2x1xf32>\n  return %r : tensor<1x2x2x1xf32>\n}\n")
    with pytest.raises(kiln.KilnError) as info:
        kiln.compile(source, filename="conv.mlir", isolate=False)
    assert info.value.location.startswith("conv.mlir:2:"), str(info.value)
    assert "spatial dimension" in info.value.message and "out of range" in info.value.message


# ---- gap 4: reduce over zero elements -----------------------------------------------------
# The spec's result is the init value at every position (a window of no elements); it used to
# fail with "cannot lower".

_REDUCERS = {"add": np.add, "multiply": np.multiply, "maximum": np.maximum,
             "minimum": np.minimum}


@pytest.mark.parametrize("shape, dims, body, dtype", [
    ((0, 3), [0], "add", np.float32),
    ((3, 0), [1], "add", np.float32),
    ((0,), [0], "maximum", np.float32),
    ((2, 0, 4), [1], "multiply", np.int32),
    ((2, 0, 4), [0, 1], "minimum", np.float64),
    ((0, 3), [1], "add", np.float32),      # kept dimension 0: an empty result
])
def test_reduce_over_zero_elements_gives_the_init_value(shape, dims, body, dtype):
    el = {np.float32: "f32", np.float64: "f64", np.int32: "i32"}[dtype]
    kept = [n for d, n in enumerate(shape) if d not in dims]
    in_t = "tensor<" + "x".join(map(str, shape)) + f"x{el}>"
    out_t = "tensor<" + "".join(f"{n}x" for n in kept) + f"{el}>"
    dims_text = ", ".join(map(str, dims))
    source = (f"func.func @main(%x: {in_t}, %z: tensor<{el}>) -> {out_t} {{\n"
              f"  %r = stablehlo.reduce(%x init: %z) applies stablehlo.{body} across dimensions ="
              f" [{dims_text}] : ({in_t}, tensor<{el}>) -> {out_t}\n  return %r : {out_t}\n}}")
    x, init = np.zeros(shape, dtype), np.array(7, dtype)
    (got,) = kiln.compile(source)(x, init)
    want = _REDUCERS[body].reduce(x, axis=tuple(dims), initial=init, dtype=dtype)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    jax = pytest.importorskip("jax")
    from jax import lax
    jax_want = lax.reduce(x, init, getattr(lax, {"maximum": "max", "minimum": "min",
                                                     "multiply": "mul"}.get(body, body)),
                          tuple(dims))
    np.testing.assert_array_equal(got, np.asarray(jax_want))


def test_reduce_of_two_inputs_over_zero_elements():
    source = (
        "func.func @main(%x: tensor<0x2xf32>, %i: tensor<0x2xi32>) -> (tensor<2xf32>, "
        "tensor<2xi32>) {\n"
        "  %z = stablehlo.constant dense<-1.0> : tensor<f32>\n"
        "  %n = stablehlo.constant dense<42> : tensor<i32>\n"
        "  %r:2 = stablehlo.reduce(%x init: %z), (%i init: %n) across dimensions = [0] : "
        "(tensor<0x2xf32>, tensor<0x2xi32>, tensor<f32>, tensor<i32>) -> (tensor<2xf32>, "
        "tensor<2xi32>)\n"
        "   reducer(%a: tensor<f32>, %b: tensor<f32>) (%c: tensor<i32>, %d: tensor<i32>) {\n"
        "    %0 = stablehlo.maximum %a, %b : tensor<f32>\n"
        "    %1 = stablehlo.add %c, %d : tensor<i32>\n"
        "    stablehlo.return %0, %1 : tensor<f32>, tensor<i32>\n  }\n"
        "  return %r#0, %r#1 : tensor<2xf32>, tensor<2xi32>\n}")
    values, indices = kiln.compile(source)(np.zeros((0, 2), np.float32), np.zeros((0, 2), np.int32))
    np.testing.assert_array_equal(values, [-1.0, -1.0])
    np.testing.assert_array_equal(indices, [42, 42])


# ---- gap 5: `kiln.` target names are Kiln's -------------------------------------------------

@pytest.mark.parametrize("name", ["kiln.fft", "kiln.collective.all_reduce", "kiln.mine"])
def test_registering_a_kiln_target_name_is_refused(name):
    from kiln.runtime.custom_call import REGISTRY
    before = REGISTRY.lookup(name)
    with pytest.raises(kiln.KilnError, match=f"custom-call target name '{name}' is reserved: "
                                             "'kiln.\\*' names Kiln's internal runtime targets"):
        kiln.register_custom_call(name, lambda results, operands, **kw: None)
    assert REGISTRY.lookup(name) is before   # Kiln's own target (or none) stays


def test_a_library_symbol_under_a_kiln_name_is_refused():
    import ctypes.util
    import os
    libm = next((p for p in ("/lib/x86_64-linux-gnu/libm.so.6", "/usr/lib/x86_64-linux-gnu/libm.so.6",
                             "/lib64/libm.so.6", ctypes.util.find_library("m") or "")
                 if p and os.path.isfile(p)), None)
    if libm is None:
        pytest.skip("no libm shared object at a known path")
    with pytest.raises(kiln.KilnError, match=r"'kiln.cos' \(from .*libm.so.6\) is reserved"):
        kiln.register_custom_call_library(libm, symbols={"kiln.cos": "cos"})
    from kiln.runtime.custom_call import REGISTRY
    assert REGISTRY.lookup("kiln.cos") is None


def test_the_reserved_prefix_is_the_dialects():
    from kiln.dialects.kiln import PREFIX
    from kiln.runtime.custom_call import INTERNAL_PREFIX
    assert INTERNAL_PREFIX == PREFIX


def test_kiln_fft_still_runs_after_a_refused_registration():
    with pytest.raises(kiln.KilnError):
        kiln.register_custom_call("kiln.fft", lambda *a, **k: None)
    source = ("func.func @main(%x: tensor<8xcomplex<f32>>) -> tensor<8xcomplex<f32>> {\n"
              "  %r = stablehlo.fft %x, type = FFT, length = [8] : (tensor<8xcomplex<f32>>) -> "
              "tensor<8xcomplex<f32>>\n  return %r : tensor<8xcomplex<f32>>\n}")
    x = (np.arange(8) + 1j * np.arange(8)[::-1]).astype(np.complex64)
    np.testing.assert_allclose(kiln.compile(source)(x)[0], np.fft.fft(x), rtol=1e-5, atol=1e-4)
