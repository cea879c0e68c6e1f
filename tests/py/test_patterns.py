"""lowering/patterns.py: Kiln's lowerings applied as rewrite patterns by MLIR's walk driver."""
from __future__ import annotations

import pytest
from torch_mlir import ir

from kiln.context import make_context
from kiln.errors import KilnError
from kiln.lowering.ir_util import walk
from kiln.lowering.patterns import pattern_pass, replace_op

SOURCE = """func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.negate %x : tensor<4xf32>
  %1 = stablehlo.negate %0 : tensor<4xf32>
  return %1 : tensor<4xf32>
}"""


def _module():
    ctx = make_context()
    with ctx:
        return ir.Module.parse(SOURCE)


def _negate_as_subtract(op: ir.Operation):
    with ir.InsertionPoint(op), op.location:
        zero = ir.Operation.create("stablehlo.constant", results=[op.results[0].type],
                                   attributes={"value": ir.DenseElementsAttr.get_splat(
                                       op.results[0].type, ir.FloatAttr.get_f32(0.0))})
        diff = ir.Operation.create("stablehlo.subtract", results=[op.results[0].type],
                                   operands=[zero.results[0], op.operands[0]])
    replace_op(op, [diff.results[0]])


def test_each_root_op_is_rewritten_once_and_located():
    module = _module()
    pattern_pass({"stablehlo.negate": _negate_as_subtract})(module)
    names = [op.name for op in walk(module.operation)]
    assert "stablehlo.negate" not in names and names.count("stablehlo.subtract") == 2
    module.operation.verify()


def test_a_lowering_may_decline():
    module = _module()
    pattern_pass({"stablehlo.negate": lambda op: False})(module)
    assert [op.name for op in walk(module.operation)].count("stablehlo.negate") == 2


def test_an_error_in_a_pattern_reaches_the_caller_after_the_driver():
    module = _module()

    def refuse(op):
        raise KilnError("cannot lower this negate", location=str(op.location))

    with pytest.raises(KilnError, match="cannot lower this negate"):
        pattern_pass({"stablehlo.negate": refuse})(module)
