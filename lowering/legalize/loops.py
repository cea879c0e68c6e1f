"""Op builders shared by the lowerings that turn one StableHLO op into scf loops over tensors
(sort, scatter, select_and_scatter), which upstream `stablehlo-legalize-to-linalg` lacks.

A lowering builds its loops in place of the op, inside `with ir.InsertionPoint(op),
op.location:` so that every op it creates carries the location of the op it lowers, then
hands the op's results over with `replace_op`. The loops run over flat positions
(`delinearize` turns one into coordinates) and carry the tensors they update as iter_args.

An op's region (scatter's update computation, sort's comparator) is applied to scalars by
cloning its StableHLO body over 0-d tensors (`apply_region`); upstream then lowers those
0-d ops like any others, and the loops marked with SCALARIZE_ATTR (`for_loop(...,
scalarize=True)`) get the resulting 0-d linalg.generics unwrapped into scalars afterwards
(scalarize.py), so that no iteration allocates a buffer.
"""
from __future__ import annotations

from ..patterns import replace_op  # noqa: F401 - the lowerings' way to finish

from typing import Callable, Sequence

from torch_mlir import ir
from torch_mlir.dialects import arith, scf, tensor

from ...errors import KilnError
from ..ir_util import clone_ops
from ...dialects import kiln as names

SCALARIZE_ATTR = names.SCALARIZE


def static_tensor_type(value: ir.Value, op: ir.Operation) -> ir.RankedTensorType:
    """`value`'s type, which the loop lowerings need statically shaped."""
    t = value.type
    if not isinstance(t, ir.RankedTensorType) or not t.has_static_shape:
        raise KilnError(f"'{op.name}' on a dynamically shaped operand ({t}) is not supported",
                        location=str(op.location),
                        hint="give the program static shapes (or call it with concrete "
                             "arguments so Kiln can refine them)")
    return t


class IndexConstants:
    """`index` constants, each built once, in one group ahead of everything the lowering builds
    afterwards so that every loop nested later can use them. Create it at the lowering's
    insertion point, before building anything else."""

    def __init__(self):
        self._values: dict[int, ir.Value] = {}
        self._last: ir.Operation | None = None
        self(0)  # the group's first member fixes where the group lives

    def __call__(self, value: int) -> ir.Value:
        if value not in self._values:
            ip = None if self._last is None else ir.InsertionPoint.after(self._last)
            constant = arith.ConstantOp.create_index(value, ip=ip)
            self._last = constant.operation
            self._values[value] = constant.result
        return self._values[value]


def boolean(value: bool) -> ir.Value:
    return arith.ConstantOp(ir.IntegerType.get_signless(1), int(value)).result


def for_loop(lower: ir.Value, upper: ir.Value, step: ir.Value, inits: Sequence[ir.Value],
             body: Callable[[ir.Value, list[ir.Value]], Sequence[ir.Value]], *,
             scalarize: bool = False) -> list[ir.Value]:
    """`scf.for` carrying `inits`; `body(iv, carried)` builds one iteration and returns the
    values it yields. `scalarize` marks the loop for the scalarize step."""
    loop = scf.ForOp(lower, upper, step, list(inits))
    with ir.InsertionPoint(loop.body):
        scf.yield_(list(body(loop.induction_variable, list(loop.inner_iter_args))))
    if scalarize:
        loop.operation.attributes[SCALARIZE_ATTR] = ir.UnitAttr.get()
    return list(loop.results)


def if_else(condition: ir.Value, types: Sequence[ir.Type],
            then_body: Callable[[], Sequence[ir.Value]],
            else_body: Callable[[], Sequence[ir.Value]]) -> list[ir.Value]:
    """`scf.if` with both branches; each body builds its branch and returns what it yields."""
    branch = scf.IfOp(condition, list(types), has_else=True)
    with ir.InsertionPoint(branch.then_block):
        scf.yield_(list(then_body()))
    with ir.InsertionPoint(branch.else_block):
        scf.yield_(list(else_body()))
    return list(branch.results)


def delinearize(index: IndexConstants, flat: ir.Value, shape: Sequence[int]) -> list[ir.Value]:
    """Row-major coordinates of `flat` in `shape` (size-1 dims need no arithmetic)."""
    coords: list[ir.Value | None] = [None] * len(shape)
    rest = flat
    for d in reversed(range(len(shape))):
        if shape[d] == 1:
            coords[d] = index(0)
            continue
        if all(s == 1 for s in shape[:d]):
            coords[d] = rest
            rest = index(0)
            continue
        size = index(shape[d])
        coords[d] = arith.remui(rest, size)
        rest = arith.divui(rest, size)
    return coords


def all_true(conditions: Sequence[ir.Value]) -> ir.Value:
    if not conditions:
        return boolean(True)
    result = conditions[0]
    for condition in conditions[1:]:
        result = arith.andi(result, condition)
    return result


def apply_region(region: ir.Region, scalars: Sequence[ir.Value],
                 result_elements: Sequence[ir.Type]) -> list[ir.Value]:
    """Apply an op's region to scalar values at the current insertion point. StableHLO bodies
    take and return 0-d tensors, so the scalars are wrapped and the results unwrapped; the
    body itself is cloned as is (any StableHLO ops)."""
    wrapped = [tensor.from_elements(ir.RankedTensorType.get([], v.type), [v]) for v in scalars]
    returned = clone_region_body(region, wrapped)
    location = ir.Location.current
    for value, element in zip(returned, result_elements):
        if value.type != ir.RankedTensorType.get([], element):
            raise KilnError(f"region returns {value.type} where Kiln expects tensor<{element}>",
                            location=str(location),
                            hint="the region must return 0-d tensors of the results' "
                                 "element types")
    return [tensor.extract(v, []) for v in returned]


def clone_region_body(region: ir.Region, arguments: Sequence[ir.Value]) -> list[ir.Value]:
    """Clone `region`'s single block at the current insertion point with its arguments bound
    to `arguments`; returns the values its terminator returns."""
    location = ir.Location.current
    if len(region.blocks) != 1:
        raise KilnError("regions with several blocks are not supported here",
                        location=str(location), hint="use a single-block region")
    block = region.blocks[0]
    mapping: dict[ir.Value, ir.Value] = {}
    for arg, value in zip(block.arguments, arguments):
        if arg.type != value.type:
            raise KilnError(f"region argument of type {arg.type} where Kiln passes {value.type}",
                            location=str(location),
                            hint="the region's argument types must be 0-d tensors of the "
                                 "operands' element types")
        mapping[arg] = value
    body = [o.operation for o in block.operations]
    clone_ops(body[:-1], mapping, ir.InsertionPoint.current)
    return [mapping.get(v, v) for v in body[-1].operands]


