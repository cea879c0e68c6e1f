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

from ...errors import KilnError
from ..ir_util import walk
from .data_movement import SCALARIZE_ATTR, Text, replace_with_helper, tensor_type, type_text


def lower_select_and_scatters(module: ir.Module) -> None:
    for op in [o for o in walk(module.operation) if o.name == "stablehlo.select_and_scatter"]:
        _lower(op)


def _i64_array(op: ir.Operation, name: str, default: list[int]) -> list[int]:
    if name not in op.attributes:
        return default
    return list(ir.DenseI64ArrayAttr(op.attributes[name]))


def _lower(op: ir.Operation) -> None:
    operand, source, init = op.operands
    otype, stype = tensor_type(operand, op), tensor_type(source, op)
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

    e = str(otype.element_type)
    tt = type_text(shape, e)
    se = str(stype.element_type)
    st = type_text(sshape, se)
    t = Text("ss")
    body = t.lines
    c0, c1 = t.index(0), t.index(1)
    fill = t.op(f"tensor.extract %init[] : tensor<{e}>")
    empty = t.op(f"tensor.empty() : {tt}")
    start = t.op(f"linalg.fill ins({fill} : {e}) outs({empty} : {tt}) -> {tt}")
    if prod(sshape) == 0 or prod(window) == 0 or prod(shape) == 0:
        result = start
    else:
        result = t.fresh("res")
        s, acc = t.fresh("s"), t.fresh("acc")
        t.emit(f"{result} = scf.for {s} = {c0} to {t.index(prod(sshape))} step {c1} "
               f"iter_args({acc} = {start}) -> ({tt}) {{")
        scoords = t.delinearize(s, sshape)
        base = []
        for d in range(rank):
            b = scoords[d] if strides[d] == 1 else t.mul(scoords[d], t.index(strides[d]))
            base.append(b if low[d] == 0 else t.op(f"arith.subi {b}, {t.index(low[d])} : index"))

        # Walk the window carrying (found anything, chosen coordinates).
        found = t.fresh("found")
        chosen = [t.fresh("sel") for _ in range(rank)]
        w, has = t.fresh("w"), t.fresh("has")
        cur = [t.fresh("cur") for _ in range(rank)]
        carried = ", ".join([f"{has} = {t.op('arith.constant false')}"]
                            + [f"{a} = {c0}" for a in cur])
        idx_types = ", ".join(["i1"] + ["index"] * rank)
        t.emit(f"{found}:{rank + 1} = scf.for {w} = {c0} to {t.index(prod(window))} step {c1} "
               f"iter_args({carried}) -> ({idx_types}) {{")
        wcoords = t.delinearize(w, window)
        pos = [wcoords[d] if base[d] == c0 else t.add(base[d], wcoords[d]) for d in range(rank)]
        inside = []
        for d in range(rank):
            inside.append(t.op(f"arith.cmpi sge, {pos[d]}, {c0} : index"))
            inside.append(t.op(f"arith.cmpi slt, {pos[d]}, {t.index(shape[d])} : index"))
        valid = t.all_true(inside)
        step = t.fresh("step")
        t.emit(f"{step}:{rank + 1} = scf.if {valid} -> ({idx_types}) {{")
        # Before anything is found, compare the candidate with itself; the result is unused.
        probe = [t.op(f"arith.select {has}, {c}, {p} : index") for c, p in zip(cur, pos)]
        a = t.op(f"tensor.extract %operand[{', '.join(probe)}] : {tt}")
        b = t.op(f"tensor.extract %operand[{', '.join(pos)}] : {tt}")
        (keep,) = t.apply_region(0, [a, b], [e, e], ["i1"])
        keep = t.op(f"arith.andi {has}, {keep} : i1")
        new = [t.op(f"arith.select {keep}, {c}, {p} : index") for c, p in zip(cur, pos)]
        t.emit(f"scf.yield {t.op('arith.constant true')}, {', '.join(new)} : {idx_types}")
        t.emit("} else {")
        t.emit(f"scf.yield {has}, {', '.join(cur)} : {idx_types}")
        t.emit("}")
        t.emit(f"scf.yield {', '.join(f'{step}#{i}' for i in range(rank + 1))} : {idx_types}")
        t.emit(f"}} {{{SCALARIZE_ATTR}}}")

        scattered = t.fresh("scattered")
        t.emit(f"{scattered} = scf.if {found}#0 -> ({tt}) {{")
        at = ", ".join(f"{found}#{d + 1}" for d in range(rank))
        x = t.op(f"tensor.extract {acc}[{at}] : {tt}")
        y = t.op(f"tensor.extract %source[{', '.join(scoords)}] : {st}")
        (z,) = t.apply_region(1, [x, y], [e, se], [e])
        t.emit(f"scf.yield {t.op(f'tensor.insert {z} into {acc}[{at}] : {tt}')} : {tt}")
        t.emit("} else {")
        t.emit(f"scf.yield {acc} : {tt}")
        t.emit("}")
        t.emit(f"scf.yield {scattered} : {tt}")
        t.emit(f"}} {{{SCALARIZE_ATTR}}}")

    text = (f"func.func private @kiln_select_and_scatter(%operand: {tt}, %source: {st}, "
            f"%init: tensor<{e}>) -> {tt} {{\n"
            + "\n".join(t.constant_lines() + body)
            + f"\nreturn {result} : {tt}\n}}")
    replace_with_helper(op, text, [operand, source, init], [op.regions[0], op.regions[1]])
