"""Cumulative `stablehlo.reduce_window` -> a linear scan (`jnp.cumsum`, `cumprod`, `cummax`...).

JAX writes a cumulative reduction along dimension d of size n as a reduce_window whose window
spans all n elements of d, padded with n - 1 init values on one side, stride 1. Lowered as a
window, output i reduces its whole window: O(n^2) work (1M floats: 49 s). As a scan it is
O(n). It combines in index order, starting from init, as the window's definition does (the
window lowering may reassociate, so the last bits of a float sum can differ from it).

The operand is seen (by reshapes, no copies) as [outer, n, inner]: the dimensions before d,
d, and those after it, a side of size 1 left out. The scans along the outer dimension are
independent, one loop iteration each; inside one:
* no inner dimensions (cumsum along rows): the running value rides in a register, one
  element a step, and nothing is allocated per step (the first lowering carried a 0-d
  tensor: ~230 ns a step, 0.24 s for 1M floats; now about 1 ns);
* inner dimensions (cumsum down columns): the first row combines init with the input row,
  every later row the previous output row with the next input row, in an innermost loop
  over the row that LLVM vectorizes.
The region's op is applied to scalars (loops.apply_region) in loops marked for
scalarize.py, and the result is written through a reshape of a tensor of the result's shape,
so that bufferization writes the caller's buffer directly.

Only windows of that exact shape whose body is one elementwise binary op of its two
arguments become scans; everything else is left to the window lowering.
"""
from __future__ import annotations

import math

from torch_mlir import ir
from torch_mlir.dialects import arith, tensor

from ..patterns import pattern_pass
from .loops import IndexConstants, apply_region, for_loop, replace_op

# Bodies the scan applies: one elementwise binary op, associative like a window's reduction.
_COMBINERS = {"stablehlo.add", "stablehlo.multiply", "stablehlo.maximum", "stablehlo.minimum",
              "stablehlo.and", "stablehlo.or", "stablehlo.xor"}


def _ints(op: ir.Operation, name: str, rank: int, default: int) -> list[int]:
    if name not in op.attributes:
        return [default] * rank
    return list(ir.DenseI64ArrayAttr(op.attributes[name]))


def _scan_plan(op: ir.Operation) -> tuple[int, bool] | None:
    """(dimension, reverse) when `op` is a cumulative reduction, else None."""
    if len(op.operands) != 2 or len(op.results) != 1:
        return None
    x_type = op.operands[0].type
    if not isinstance(x_type, ir.RankedTensorType) or not x_type.has_static_shape:
        return None
    shape, rank = list(x_type.shape), x_type.rank
    window = _ints(op, "window_dimensions", rank, 1)
    if _ints(op, "window_strides", rank, 1) != [1] * rank or \
            _ints(op, "base_dilations", rank, 1) != [1] * rank or \
            _ints(op, "window_dilations", rank, 1) != [1] * rank:
        return None
    padding = [[0, 0]] * rank
    if "padding" in op.attributes:
        flat = [int(v) for v in ir.DenseIntElementsAttr(op.attributes["padding"])]
        padding = [flat[2 * i:2 * i + 2] for i in range(rank)]
    scanned = [d for d in range(rank) if window[d] != 1 or padding[d] != [0, 0]]
    if len(scanned) != 1:
        return None
    d = scanned[0]
    n = shape[d]
    if n < 2 or window[d] != n or padding[d] not in ([n - 1, 0], [0, n - 1]):
        return None
    body = op.regions[0].blocks[0]
    ops = [o.operation for o in body.operations]
    if len(ops) != 2 or ops[0].name not in _COMBINERS or ops[1].name != "stablehlo.return":
        return None
    args = list(body.arguments)
    if set(map(_value_id, ops[0].operands)) != set(map(_value_id, args)) or \
            _value_id(ops[1].operands[0]) != _value_id(ops[0].results[0]):
        return None
    return d, padding[d] == [0, n - 1]


def _value_id(value: ir.Value):
    return value  # ir.Value hashes and compares by the underlying value


def _lower_scan(op: ir.Operation) -> bool | None:
    plan = _scan_plan(op)
    if plan is None:
        return False
    d, reverse = plan
    x, init = op.operands[0], op.operands[1]
    x_type = ir.RankedTensorType(x.type)
    shape, etype = list(x_type.shape), x_type.element_type
    groups = _view_groups(shape, d)
    axis = next(i for i, group in enumerate(groups) if d in group)
    with ir.InsertionPoint(op), op.location:
        view = ir.RankedTensorType.get([math.prod(shape[g] for g in group) for group in groups],
                                       etype)
        index = IndexConstants()
        # The result is written through the same view of a tensor of x's shape, so that the
        # reshapes cancel and the scan writes the caller's result buffer directly.
        out = _collapse(tensor.EmptyOp(shape, etype).result, groups, view)
        scan = _Scan(op.regions[0], _collapse(x, groups, view), tensor.extract(init, []),
                     reverse, index, axis)
        lines = scan.slabs if axis + 1 < view.rank else scan.lines
        if axis == 0:
            out = lines([], out)
        else:
            # The lines (or slabs) are independent; the loop over them is the one that polls
            # for Ctrl-C (interrupts.py), each scan inside runs unbroken.
            (out,) = for_loop(index(0), index(view.shape[0]), index(1), [out],
                              lambda o, carried: [lines([o], carried[0])])
        result = _expand(out, groups, x_type)
    replace_op(op, [result])


def _view_groups(shape: list[int], d: int) -> list[list[int]]:
    """x's dimensions grouped into at most [outer, scanned, inner]; a side whose size is 1
    joins the scanned group, so that no loop runs once."""
    before, after = list(range(d)), list(range(d + 1, len(shape)))
    scanned = [d]
    groups = []
    if before and math.prod(shape[:d]) > 1:
        groups.append(before)
    else:
        scanned = before + scanned
    if after and math.prod(shape[d + 1:]) > 1:
        return groups + [scanned, after]
    return groups + [scanned + after]


def _reassociation(groups: list[list[int]]) -> ir.ArrayAttr:
    i64 = ir.IntegerType.get_signless(64)
    return ir.ArrayAttr.get([ir.ArrayAttr.get([ir.IntegerAttr.get(i64, g) for g in group])
                             for group in groups])


def _collapse(value: ir.Value, groups: list[list[int]], view: ir.RankedTensorType) -> ir.Value:
    if len(groups) == ir.RankedTensorType(value.type).rank:
        return value
    return tensor.CollapseShapeOp(view, value, _reassociation(groups)).result


def _expand(value: ir.Value, groups: list[list[int]], t: ir.RankedTensorType) -> ir.Value:
    if len(groups) == t.rank:
        return value
    return tensor.ExpandShapeOp(t, value, _reassociation(groups), [], list(t.shape)).result


class _Scan:
    """The loops of one scan over `x`, a view of the operand as [outer?, n, inner?] whose
    dimension `axis` is the scanned one, combining with `region` from `init`."""

    def __init__(self, region: ir.Region, x: ir.Value, init: ir.Value, reverse: bool,
                 index: IndexConstants, axis: int):
        x_type = ir.RankedTensorType(x.type)
        self.region, self.x, self.init, self.reverse = region, x, init, reverse
        self.index, self.element = index, x_type.element_type
        self.n = x_type.shape[axis]
        self.inner = x_type.shape[axis + 1] if axis + 1 < x_type.rank else 1

    def position(self, step) -> ir.Value:
        """Where the scan's `step`-th element lies along the scanned dimension."""
        if isinstance(step, int):
            return self.index(self.n - 1 - step if self.reverse else step)
        return arith.subi(self.index(self.n - 1), step) if self.reverse else step

    def combine(self, running: ir.Value, value: ir.Value) -> ir.Value:
        # The region's 0-d ops, in a loop marked for scalarize.py: scalar code in the end.
        return apply_region(self.region, [running, value], [self.element])[0]

    def lines(self, outer: list[ir.Value], out: ir.Value) -> ir.Value:
        """The scanned dimension is the innermost: a line is a sequence of scalars, and the
        running value rides in a register."""
        def step(s, carried):
            running, out = carried
            at = outer + [self.position(s)]
            running = self.combine(running, tensor.extract(self.x, at))
            return [running, tensor.insert(running, out, at)]

        return for_loop(self.index(0), self.index(self.n), self.index(1), [self.init, out],
                        step, scalarize=True)[1]

    def slabs(self, outer: list[ir.Value], out: ir.Value) -> ir.Value:
        """Dimensions follow the scanned one: each step combines the previous step's output
        row with the next input row, element by element (an innermost loop LLVM vectorizes);
        the first step starts from init."""
        def row(out: ir.Value, at: ir.Value, previous: ir.Value | None) -> ir.Value:
            def element(k, carried):
                (out,) = carried
                running = self.init if previous is None else \
                    tensor.extract(out, outer + [previous, k])
                value = tensor.extract(self.x, outer + [at, k])
                return [tensor.insert(self.combine(running, value), out, outer + [at, k])]
            return for_loop(self.index(0), self.index(self.inner), self.index(1), [out],
                            element, scalarize=True)[0]

        out = row(out, self.position(0), None)
        one = self.index(1)

        def step(s, carried):
            return [row(carried[0], self.position(s), self.position(arith.subi(s, one)))]

        return for_loop(one, self.index(self.n), one, [out], step)[0]


lower_cumulative_windows = pattern_pass({"stablehlo.reduce_window": _lower_scan})
