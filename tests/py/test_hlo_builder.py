"""lowering/legalize/hlo_builder.py: the typed StableHLO builder the numerics lowerings use.
Ops land before the op being lowered with its location, result types are computed, constants
are exact, loops carry tensors; and the lowerings built on it leave only located ops."""
import math

import numpy as np
import pytest
from torch_mlir import ir

from kiln.context import make_context
from kiln.errors import KilnError
from kiln.lowering.ir_util import walk
from kiln.lowering.legalize import fft, linalg_ops, rng
from kiln.lowering.legalize.hlo_builder import (HloBuilder, element, element_type, replace_op,
                                                shape, static_shape)


def _module(ctx, text):
    return ir.Module.parse(text, ctx)


def _lowered_op(module, name):
    return next(op for op in walk(module.operation) if op.name == name)


_NEGATE = """
func.func @main(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = stablehlo.negate %x : tensor<2x3xf32> loc("user.py":7:5)
  return %0 : tensor<2x3xf32>
}"""


def test_ops_land_before_the_lowered_op_with_its_location():
    ctx = make_context()
    module = _module(ctx, _NEGATE)
    op = _lowered_op(module, "stablehlo.negate")
    with ir.InsertionPoint(op), op.location:
        h = HloBuilder()
        x = op.operands[0]
        out = h.sub(h.splat(0.0, shape(x), "f32"), x)
    replace_op(op, [out])
    assert module.operation.verify()
    body = [o.operation for o in module.body.operations[0].regions[0].blocks[0].operations]
    assert [o.name for o in body] == ["stablehlo.constant", "stablehlo.broadcast_in_dim",
                                      "stablehlo.subtract", "func.return"]
    assert all(str(o.location) == 'loc("user.py":7:5)' for o in body[:-1])
    assert "stablehlo.negate" not in str(module)


def test_result_types_follow_the_ops_definitions():
    ctx = make_context()
    module = _module(ctx, _NEGATE)
    op = _lowered_op(module, "stablehlo.negate")
    with ir.InsertionPoint(op), op.location:
        h = HloBuilder()
        x = op.operands[0]                                              # 2x3
        assert shape(h.transpose(x, [1, 0])) == (3, 2)
        assert shape(h.slice(x, [0, 1], [2, 3], [1, 2])) == (2, 1)
        assert shape(h.pad(x, h.splat(0.0, (), "f32"), [1, 0], [0, 2])) == (3, 5)
        assert shape(h.concatenate([x, x], 0)) == (4, 3)
        assert shape(h.dot(x, h.transpose(x, [1, 0]))) == (2, 2)
        assert h.reshape(x, (2, 3)) is x and h.transpose(x, [0, 1]) is x
        assert h.convert(x, "f32") is x
        z = h.complex(x, x)
        assert str(element(z)) == "complex<f32>" and str(element(h.imag(z))) == "f32"
        assert str(element(h.compare("LT", x, x, "FLOAT"))) == "i1"
        assert str(element(h.iota((4,), 0, "ui32"))) == "ui32"
    # Erase the whole function (the lowered op is still used by its return: erasing it alone
    # would leave a dangling use).
    module.body.operations[0].erase()  # the scratch ops above are not a valid function
    with ctx:
        assert str(element_type("complex<f64>")) == "complex<f64>"
        with pytest.raises(ValueError):
            element_type("f128")


def test_constants_are_exact_and_keep_their_rank():
    ctx = make_context()
    module = _module(ctx, _NEGATE)
    op = _lowered_op(module, "stablehlo.negate")
    with ir.InsertionPoint(op), op.location:
        h = HloBuilder()
        scalar = h.constant(np.asarray(3), "i64")
        nan = h.constant(np.asarray(math.nan), "f64")
        big = h.constant(np.asarray(0x846CA68B), "ui32")
        table = h.constant(np.arange(6.0).reshape(2, 3).T, "f32")  # a non-contiguous view
    assert str(scalar.type) == "tensor<i64>"
    assert str(nan.owner.attributes["value"]) == "dense<0x7FF8000000000000> : tensor<f64>"
    assert str(big.owner.attributes["value"]) == f"dense<{0x846CA68B}> : tensor<ui32>"
    got = np.array(ir.DenseElementsAttr(table.owner.attributes["value"]))
    np.testing.assert_array_equal(got, np.arange(6.0, dtype=np.float32).reshape(2, 3).T)


def test_for_loop_carries_tensors_and_indexes_with_a_0d_tensor():
    ctx = make_context()
    module = _module(ctx, _NEGATE)
    op = _lowered_op(module, "stablehlo.negate")
    seen = {}
    with ir.InsertionPoint(op), op.location:
        h = HloBuilder()

        def body(i, carried):
            seen["index"] = str(i.type)
            (acc,) = carried
            return [h.add(acc, acc)]

        (out,) = h.for_loop(4, [op.operands[0]], body)
    replace_op(op, [out])
    assert module.operation.verify()
    assert seen["index"] == "tensor<i64>"
    loop = _lowered_op(module, "scf.for")
    assert str(loop.results[0].type) == "tensor<2x3xf32>"
    assert [o.name for o in loop.regions[0].blocks[0].operations] == \
        ["arith.index_cast", "tensor.from_elements", "stablehlo.add", "scf.yield"]


def test_static_shape_errors_are_located():
    ctx = make_context()
    module = _module(ctx, """
func.func @main(%x: tensor<?xf32>) -> tensor<?xf32> {
  %0 = stablehlo.negate %x : tensor<?xf32> loc("user.py":3:1)
  return %0 : tensor<?xf32>
}""")
    op = _lowered_op(module, "stablehlo.negate")
    with pytest.raises(KilnError) as info:
        static_shape(op.operands[0], op)
    assert '"user.py":3:1' in str(info.value) and "statically shaped" in str(info.value)
    assert info.value.hint


@pytest.mark.parametrize("lower, src", [
    (fft.lower_fft, """
func.func @main(%x: tensor<3x8xcomplex<f32>>) -> tensor<3x8xcomplex<f32>> {
  %0 = stablehlo.fft %x, type = FFT, length = [8] : (tensor<3x8xcomplex<f32>>) -> tensor<3x8xcomplex<f32>> loc("user.py":11:2)
  return %0 : tensor<3x8xcomplex<f32>>
}"""),
    (linalg_ops.lower_linalg_ops, """
func.func @main(%a: tensor<2x4x4xcomplex<f64>>) -> tensor<2x4x4xcomplex<f64>> {
  %0 = "stablehlo.cholesky"(%a) {lower = false} : (tensor<2x4x4xcomplex<f64>>) -> tensor<2x4x4xcomplex<f64>> loc("user.py":11:2)
  return %0 : tensor<2x4x4xcomplex<f64>>
}"""),
    (rng.lower_rng, """
func.func @main(%a: tensor<f16>, %b: tensor<f16>) -> tensor<3x5xf16> {
  %s = stablehlo.constant dense<[3, 5]> : tensor<2xi64>
  %0 = stablehlo.rng %a, %b, %s, distribution = NORMAL : (tensor<f16>, tensor<f16>, tensor<2xi64>) -> tensor<3x5xf16> loc("user.py":11:2)
  return %0 : tensor<3x5xf16>
}"""),
])
def test_lowerings_build_located_valid_ir(lower, src):
    """Every op a lowering builds (loops and their bodies included) carries the location of
    the op it lowers; the ops that were there before are left as they were."""
    user = 'loc("user.py":11:2)'
    ctx = make_context()
    module = _module(ctx, src)
    func = module.body.operations[0].operation

    def ops():
        return [o for o in walk(func) if o.name not in ("func.func", "func.return")]

    untouched = sorted(str(o) for o in ops() if str(o.location) != user)
    lowered = {o.name for o in ops() if str(o.location) == user}
    with ctx:
        lower(module)
    assert module.operation.verify()
    after = ops()
    assert not lowered & {o.name for o in after}
    assert sorted(str(o) for o in after if str(o.location) != user) == untouched
    assert sum(str(o.location) == user for o in after) > 10
