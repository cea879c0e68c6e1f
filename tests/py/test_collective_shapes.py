"""Fuzz finding F6: a collective whose declared result shape does not match its operand and
replica groups is a located KilnError at compile time (kiln-lower-collectives, so HLO and
StableHLO input alike), and the run-time collective refuses such a result with a KilnError
instead of numpy's bare ValueError."""
from __future__ import annotations

import json

import numpy as np
import pytest

import kiln
from kiln.distributed import collectives as C
from kiln.errors import KilnError

# After a fuzzer's mutant (`replica_groupq=`, now itself an error: an attribute nothing reads):
# without replica groups the group is all 4 replicas and the gather gives f32[8], not the
# declared f32[4].
MUTANT = """HloModule error_unequal_groups, replica_count=4
ENTRY main {
  p = f32[2] parameter(0)
  ROOT g = f32[4] all-gather(p), dimensions={0}
}
"""

ADD = """({ ^bb0(%a: tensor<f32>, %b: tensor<f32>):
        %s = stablehlo.add %a, %b : tensor<f32>
        stablehlo.return %s : tensor<f32> })"""
NO_GROUPS = "replica_groups = dense<> : tensor<0x0xi64>"


def _program(op: str, arg: str, result: str, replicas: int = 4) -> str:
    return (f"module attributes {{mhlo.num_replicas = {replicas} : i32}} {{\n"
            f"  func.func @main(%x: {arg}) -> {result} {{\n    {op}\n"
            f"    return %r : {result}\n  }}\n}}")


def test_the_fuzzers_hlo_all_gather_is_a_located_error():
    with pytest.raises(KilnError, match=r"declared tensor<4xf32>, but groups \[\[0, 1, 2, 3\]\] "
                                        r"give 8 \(operand dimension 0 x group size 4\)") as err:
        kiln.compile(MUTANT, filename="mutant.hlo")
    assert err.value.location and err.value.location.startswith("mutant.hlo:")
    assert "replica groups" in err.value.hint


@pytest.mark.parametrize("op,arg,result,message", [
    (f'%r = "stablehlo.all_gather"(%x) {{all_gather_dim = 1 : i64, {NO_GROUPS}}} '
     ': (tensor<2x3xf32>) -> tensor<2x6xf32>', "tensor<2x3xf32>", "tensor<2x6xf32>",
     r"give 2x12 \(operand dimension 1 x group size 4\)"),
    (f'%r = "stablehlo.reduce_scatter"(%x) {ADD} {{scatter_dimension = 0 : i64, {NO_GROUPS}}} '
     ': (tensor<8xf32>) -> tensor<4xf32>', "tensor<8xf32>", "tensor<4xf32>",
     r"give 2 \(operand dimension 0 / group size 4\)"),
    (f'%r = "stablehlo.reduce_scatter"(%x) {ADD} {{scatter_dimension = 0 : i64, {NO_GROUPS}}} '
     ': (tensor<6xf32>) -> tensor<2xf32>', "tensor<6xf32>", "tensor<2xf32>",
     r"operand dimension 0 of size 6 does not split into 4 equal parts"),
], ids=["all_gather", "reduce_scatter", "reduce_scatter_indivisible"])
def test_stablehlo_collectives_with_default_groups_check_their_result(op, arg, result, message):
    with pytest.raises(KilnError, match=message) as err:
        kiln.compile(_program(op, arg, result), filename="bad.mlir")
    assert err.value.location == "bad.mlir:3:10"


def test_matching_result_shapes_still_compile_and_run():
    op = (f'%r = "stablehlo.all_gather"(%x) {{all_gather_dim = 1 : i64, {NO_GROUPS}}} '
          ': (tensor<2x3xf32>) -> tensor<2x12xf32>')
    exe = kiln.compile(_program(op, "tensor<2x3xf32>", "tensor<2x12xf32>"))
    xs = [np.full((2, 3), d, np.float32) + np.arange(3, dtype=np.float32) for d in range(4)]
    got = exe.run_devices([[x] for x in xs])
    for d in range(4):
        np.testing.assert_array_equal(got[d][0], np.concatenate(xs, axis=1))


def _config(**cfg) -> str:
    return json.dumps({"groups": [[0]], **cfg})


# The run-time check, called directly on a lone device (a group of one): the compile-time
# check cannot see dynamic dimensions, so the targets must not trust their result buffers.
@pytest.mark.parametrize("target,operand,result,cfg,message", [
    (C.all_gather, (2, 3), (2, 6), {"dim": 1}, r"all_gather: the result has shape \[2, 6\], "
                                               r"but group \[0\] produces \[2, 3\]"),
    (C.all_reduce, (4,), (5,), {"reduction": "add"}, r"all_reduce: .* produces \[4\]"),
    (C.reduce_scatter, (4,), (2,), {"dim": 0, "reduction": "add"},
     r"reduce_scatter: .* produces \[4\]"),
    (C.all_to_all, (4, 2), (4, 4), {"split_dim": 0, "concat_dim": 1},
     r"all_to_all: .* produces \[4, 2\]"),
], ids=["all_gather", "all_reduce", "reduce_scatter", "all_to_all"])
def test_run_time_collectives_refuse_a_wrong_result_shape(target, operand, result, cfg, message):
    out = np.zeros(result, np.float32)
    with pytest.raises(KilnError, match=message) as err:
        target([out], [np.ones(operand, np.float32)], backend_config=_config(**cfg))
    assert err.value.hint
    assert not out.any()  # nothing was written


def test_run_time_collective_permute_refuses_a_wrong_result_shape():
    cfg = json.dumps({"groups": [[0]], "pairs": [[0, 0]]})
    with pytest.raises(KilnError, match=r"collective_permute: .* produces \[3\]"):
        C.collective_permute([np.zeros(4, np.float32)], [np.ones(3, np.float32)],
                             backend_config=cfg)
