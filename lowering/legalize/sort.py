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

from ..ir_util import walk
from .data_movement import SCALARIZE_ATTR, Text, replace_with_helper, tensor_type, type_text


def lower_sorts(module: ir.Module) -> None:
    for op in [o for o in walk(module.operation) if o.name == "stablehlo.sort"]:
        _lower(op)


def _lower(op: ir.Operation) -> None:
    inputs = list(op.operands)
    n_ops = len(inputs)
    types = [tensor_type(v, op) for v in inputs]
    shape = list(types[0].shape)
    rank = len(shape)
    dim = ir.IntegerAttr(op.attributes["dimension"]).value if "dimension" in op.attributes else -1
    if dim < 0:
        dim += rank
    n = shape[dim] if rank else 1
    if n <= 1 or prod(shape) == 0:
        for result, value in zip(op.results, inputs):
            result.replace_all_uses_with(value)
        op.erase()
        return

    elements = [str(t.element_type) for t in types]
    ttypes = [type_text(shape, e) for e in elements]
    all_types = ", ".join(ttypes)
    other = [s for d, s in enumerate(shape) if d != dim]
    rows = prod(other)

    t = Text("so")
    body = t.lines
    sources = [f"%in{i}" for i in range(n_ops)]
    width = 1
    while width < n:
        empties = [t.op(f"tensor.empty() : {ttypes[i]}") for i in range(n_ops)]
        sources = _merge_pass(t, sources, empties, shape, dim, n, width, rows, other, elements,
                              ttypes, all_types)
        width *= 2

    args = ", ".join(f"%in{i}: {ttypes[i]}" for i in range(n_ops))
    text = (f"func.func private @kiln_sort({args}) -> ({all_types}) {{\n"
            + "\n".join(t.constant_lines() + body)
            + f"\nreturn {', '.join(sources)} : {all_types}\n}}")
    replace_with_helper(op, text, inputs, [op.regions[0]])


def _merge_pass(t: Text, src, init, shape, dim, n, width, rows, other, elements, ttypes,
                all_types) -> list[str]:
    """One pass: merge adjacent runs of `width` from `src` into `init`; returns the results."""
    n_ops = len(src)
    c0, c1 = t.index(0), t.index(1)
    out = t.fresh("pass")
    row = t.fresh("row")
    dst = [t.fresh("dst") for _ in range(n_ops)]
    t.emit(f"{out}:{n_ops} = scf.for {row} = {c0} to {t.index(rows)} step {c1} "
           f"iter_args({', '.join(f'{a} = {b}' for a, b in zip(dst, init))}) -> ({all_types}) {{")
    row_coords = t.delinearize(row, other)

    def at(pos: str) -> str:
        coords = list(row_coords)
        coords.insert(dim, pos)
        return ", ".join(coords)

    blocks = t.fresh("blocks")
    start = t.fresh("bs")
    dst2 = [t.fresh("dst") for _ in range(n_ops)]
    t.emit(f"{blocks}:{n_ops} = scf.for {start} = {c0} to {t.index(n)} step {t.index(2 * width)} "
           f"iter_args({', '.join(f'{a} = {b}' for a, b in zip(dst2, dst))}) -> ({all_types}) {{")
    mid = t.op(f"arith.minsi {t.add(start, t.index(width))}, {t.index(n)} : index")
    end = t.op(f"arith.minsi {t.add(start, t.index(2 * width))}, {t.index(n)} : index")

    merged = t.fresh("merge")
    k, i, j = t.fresh("k"), t.fresh("i"), t.fresh("j")
    dst3 = [t.fresh("dst") for _ in range(n_ops)]
    carried = [f"{i} = {start}", f"{j} = {mid}"] + [f"{a} = {b}" for a, b in zip(dst3, dst2)]
    t.emit(f"{merged}:{n_ops + 2} = scf.for {k} = {start} to {end} step {c1} "
           f"iter_args({', '.join(carried)}) -> (index, index, {all_types}) {{")
    i_ok = t.op(f"arith.cmpi slt, {i}, {mid} : index")
    j_ok = t.op(f"arith.cmpi slt, {j}, {end} : index")
    i_safe = t.op(f"arith.select {i_ok}, {i}, {start} : index")
    j_safe = t.op(f"arith.select {j_ok}, {j}, {start} : index")
    lefts, rights = [], []
    for s, tt in zip(src, ttypes):
        lefts.append(t.op(f"tensor.extract {s}[{at(i_safe)}] : {tt}"))
        rights.append(t.op(f"tensor.extract {s}[{at(j_safe)}] : {tt}"))
    # comparator(right, left): does the right element strictly precede the left one?
    pairs = [v for r, l in zip(rights, lefts) for v in (r, l)]
    (less,) = t.apply_region(0, pairs, [e for e in elements for _ in range(2)], ["i1"])
    i_done = t.op(f"arith.xori {i_ok}, {t.op('arith.constant true')} : i1")
    right_first = t.op(f"arith.ori {i_done}, {less} : i1")
    take_right = t.op(f"arith.andi {j_ok}, {right_first} : i1")
    pick = t.op(f"arith.select {take_right}, {j_safe}, {i_safe} : index")
    stored = []
    for s, d, tt in zip(src, dst3, ttypes):
        v = t.op(f"tensor.extract {s}[{at(pick)}] : {tt}")
        stored.append(t.op(f"tensor.insert {v} into {d}[{at(k)}] : {tt}"))
    next_i = t.op(f"arith.select {take_right}, {i}, {t.add(i, c1)} : index")
    next_j = t.op(f"arith.select {take_right}, {t.add(j, c1)}, {j} : index")
    t.emit(f"scf.yield {next_i}, {next_j}, {', '.join(stored)} : index, index, {all_types}")
    t.emit(f"}} {{{SCALARIZE_ATTR}}}")
    t.emit(f"scf.yield {', '.join(f'{merged}#{x + 2}' for x in range(n_ops))} : {all_types}")
    t.emit("}")
    t.emit(f"scf.yield {', '.join(f'{blocks}#{x}' for x in range(n_ops))} : {all_types}")
    t.emit("}")
    return [f"{out}#{x}" for x in range(n_ops)]
