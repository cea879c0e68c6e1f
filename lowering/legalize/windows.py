"""stablehlo.select_and_scatter -> scf loops (upstream has no lowering).

XLA's semantics: the result starts as init_value everywhere. For each source element, in
row-major order, its window over the (padded) operand is walked in row-major order; the
first element inside the operand becomes the candidate, and each later one `e` replaces the
current choice `c` unless select(c, e) holds (select is called with the lexicographically
earlier index first). Padding is never selected; a window entirely in padding scatters
nothing. The chosen result element becomes scatter(result[chosen], source element).

(reduce_window with padding and base/window dilation is lowered by upstream correctly; see
tests/py/test_windows.py.)
"""
from __future__ import annotations

from math import prod

from torch_mlir import ir
from torch_mlir.dialects import arith, linalg, tensor

from ...errors import KilnError
from ..patterns import pattern_pass
from .loops import (IndexConstants, all_true, apply_region, boolean, delinearize, for_loop,
                    if_else, replace_op, static_tensor_type)

SGE, SLT = arith.CmpIPredicate.sge, arith.CmpIPredicate.slt


def _i64_array(op: ir.Operation, name: str, default: list[int]) -> list[int]:
    if name not in op.attributes:
        return default
    return list(ir.DenseI64ArrayAttr(op.attributes[name]))


def _lower(op: ir.Operation) -> None:
    operand, source, init = op.operands
    otype, stype = static_tensor_type(operand, op), static_tensor_type(source, op)
    shape, sshape = list(otype.shape), list(stype.shape)
    rank = len(shape)
    window = _i64_array(op, "window_dimensions", [1] * rank)
    strides = _i64_array(op, "window_strides", [1] * rank)
    low = [0] * rank
    if "padding" in op.attributes:
        pads = [int(x) for x in ir.DenseIntElementsAttr(op.attributes["padding"])]
        low = pads[0::2]
    if len(window) != rank or len(strides) != rank or len(low) != rank:
        raise KilnError("stablehlo.select_and_scatter attributes do not match the operand rank",
                        location=str(op.location), hint="check the op against the spec's constraints")

    select, scatter = op.regions[0], op.regions[1]
    element = otype.element_type
    with ir.InsertionPoint(op), op.location:
        index = IndexConstants()
        c0, c1 = index(0), index(1)
        start = linalg.fill(tensor.extract(init, []), outs=[tensor.empty(shape, element)])
        if prod(sshape) == 0 or prod(window) == 0 or prod(shape) == 0:
            replace_op(op, [start])
            return

        def source_element(s: ir.Value, carried: list[ir.Value]) -> list[ir.Value]:
            (acc,) = carried
            scoords = delinearize(index, s, sshape)
            base = []  # the window's first position, in operand coordinates
            for d in range(rank):
                b = scoords[d] if strides[d] == 1 else arith.muli(scoords[d], index(strides[d]))
                base.append(b if low[d] == 0 else arith.subi(b, index(low[d])))

            def window_position(w: ir.Value, carried: list[ir.Value]) -> list[ir.Value]:
                has, cur = carried[0], carried[1:]
                wcoords = delinearize(index, w, window)
                pos = [wcoords[d] if base[d] == c0 else arith.addi(base[d], wcoords[d])
                       for d in range(rank)]
                inside = []
                for d in range(rank):
                    inside.append(arith.cmpi(SGE, pos[d], c0))
                    inside.append(arith.cmpi(SLT, pos[d], index(shape[d])))

                def consider() -> list[ir.Value]:
                    # Before anything is found, compare the candidate with itself; the result
                    # is unused.
                    probe = [arith.select(has, c, p) for c, p in zip(cur, pos)]
                    a = tensor.extract(operand, probe)
                    b = tensor.extract(operand, pos)
                    (keep,) = apply_region(select, [a, b], [ir.IntegerType.get_signless(1)])
                    keep = arith.andi(has, keep)
                    new = [arith.select(keep, c, p) for c, p in zip(cur, pos)]
                    return [boolean(True), *new]

                return if_else(all_true(inside), [c.type for c in carried], consider,
                               lambda: carried)

            # Walk the window carrying (found anything, chosen coordinates).
            found = for_loop(c0, index(prod(window)), c1, [boolean(False)] + [c0] * rank,
                             window_position, scalarize=True)

            def scatter_into() -> list[ir.Value]:
                at = found[1:]
                x = tensor.extract(acc, at)
                y = tensor.extract(source, scoords)
                (z,) = apply_region(scatter, [x, y], [element])
                return [tensor.insert(z, acc, at)]

            return if_else(found[0], [acc.type], scatter_into, lambda: [acc])

        (result,) = for_loop(c0, index(prod(sshape)), c1, [start], source_element, scalarize=True)
    replace_op(op, [result])


lower_select_and_scatters = pattern_pass({"stablehlo.select_and_scatter": _lower})
