"""stablehlo.sort -> a bottom-up merge sort in scf loops (upstream has no lowering).

Every 1-D slice along `dimension` is sorted independently. Each pass merges runs of width
w = 1, 2, 4, ... from the previous pass's tensors into fresh ones, so the whole sort is
O(n log n) comparator calls per slice. The merge takes the right-hand element only when
comparator(right, left) holds, so equal elements keep their order: the sort is always
stable, which satisfies `is_stable` and is allowed when it is false. The comparator region
is cloned as is (any body; for variadic sorts it sees lhs_i, rhs_i pairs per operand).

Comparator calls read only valid positions: an exhausted run's index is replaced by the
run's start before the read, and the choice ignores that value.
"""
from __future__ import annotations

from math import prod

from torch_mlir import ir
from torch_mlir.dialects import arith, tensor

from ..patterns import pattern_pass
from .loops import (IndexConstants, apply_region, boolean, delinearize, for_loop, replace_op,
                    static_tensor_type)

SLT = arith.CmpIPredicate.slt


def _lower(op: ir.Operation) -> None:
    inputs = list(op.operands)
    types = [static_tensor_type(v, op) for v in inputs]
    shape = list(types[0].shape)
    rank = len(shape)
    dim = ir.IntegerAttr(op.attributes["dimension"]).value if "dimension" in op.attributes else -1
    if dim < 0:
        dim += rank
    n = shape[dim] if rank else 1
    if n <= 1 or prod(shape) == 0:
        replace_op(op, inputs)
        return

    other = [s for d, s in enumerate(shape) if d != dim]
    with ir.InsertionPoint(op), op.location:
        index = IndexConstants()
        sources = inputs
        width = 1
        while width < n:
            empties = [tensor.empty(shape, t.element_type) for t in types]
            sources = _merge_pass(op.regions[0], index, sources, empties, dim, n, width, other)
            width *= 2
    replace_op(op, sources)


def _merge_pass(comparator: ir.Region, index: IndexConstants, src: list[ir.Value],
                init: list[ir.Value], dim: int, n: int, width: int,
                other: list[int]) -> list[ir.Value]:
    """One pass: merge adjacent runs of `width` from `src` into `init`; returns the results.
    Loops: rows (every slice but `dim`) > runs > merged positions."""
    c0, c1 = index(0), index(1)

    def row(flat_row: ir.Value, dst: list[ir.Value]) -> list[ir.Value]:
        row_coords = delinearize(index, flat_row, other)

        def at(pos: ir.Value) -> list[ir.Value]:
            coords = list(row_coords)
            coords.insert(dim, pos)
            return coords

        def run_pair(start: ir.Value, dst: list[ir.Value]) -> list[ir.Value]:
            mid = arith.minsi(arith.addi(start, index(width)), index(n))
            end = arith.minsi(arith.addi(start, index(2 * width)), index(n))

            def position(k: ir.Value, carried: list[ir.Value]) -> list[ir.Value]:
                i, j, dst = carried[0], carried[1], carried[2:]
                i_ok = arith.cmpi(SLT, i, mid)
                j_ok = arith.cmpi(SLT, j, end)
                i_safe = arith.select(i_ok, i, start)
                j_safe = arith.select(j_ok, j, start)
                lefts, rights = [], []
                for s in src:
                    lefts.append(tensor.extract(s, at(i_safe)))
                    rights.append(tensor.extract(s, at(j_safe)))
                # comparator(right, left): does the right element strictly precede the left one?
                pairs = [v for r, l in zip(rights, lefts) for v in (r, l)]
                (less,) = apply_region(comparator, pairs, [ir.IntegerType.get_signless(1)])
                i_done = arith.xori(i_ok, boolean(True))
                take_right = arith.andi(j_ok, arith.ori(i_done, less))
                pick = arith.select(take_right, j_safe, i_safe)
                stored = [tensor.insert(tensor.extract(s, at(pick)), d, at(k))
                          for s, d in zip(src, dst)]
                next_i = arith.select(take_right, i, arith.addi(i, c1))
                next_j = arith.select(take_right, arith.addi(j, c1), j)
                return [next_i, next_j, *stored]

            merged = for_loop(start, end, c1, [start, mid, *dst], position, scalarize=True)
            return merged[2:]

        return for_loop(c0, index(n), index(2 * width), dst, run_pair)

    return for_loop(c0, index(prod(other)), c1, init, row)


lower_sorts = pattern_pass({"stablehlo.sort": _lower})
