"""Large copies and fills as `linalg.generic`, so that kiln-parallelize spreads them over the
cores (parallel.py calls `copies_as_generics` before it plans).

Pads, slices, concatenation pieces and dynamic_update_slice bufferize to `memref.copy`
between (sub)views, `linalg.fill` / `linalg.map` of the pad value, or `linalg.copy`; on one
core these run at a fraction of the memory bandwidth the machine has. As identity-map
generics (a copy reads its source and writes its destination element by element, in the
same order) each becomes an ordinary elementwise op: parallel.py splits it along its
outermost dimension and LLVM vectorizes (or memcpy's) each chunk's contiguous rows.

Only static shapes and strides of at least `parallel.MIN_ITERATIONS` elements, at the top
level of a function, are rewritten; everything else keeps its lowering (a contiguous
`memref.copy` stays one memcpy, strided copies become loops in kiln-copies-as-loops).
"""
from __future__ import annotations

from math import prod

from torch_mlir import ir
from torch_mlir.dialects import linalg

from . import builders


def _static(t: ir.Type) -> bool:
    try:
        t = ir.MemRefType(t)
    except ValueError:
        return False
    dynamic = ir.ShapedType.get_dynamic_stride_or_offset()
    strides, _ = t.get_strides_and_offset()
    return t.has_static_shape and t.rank > 0 and all(s != dynamic for s in strides)


def _candidate(op: ir.Operation, min_elements: int, element_types: set[str]) -> bool:
    if op.parent is None or op.parent.name != "func.func":
        return False
    if op.name not in ("memref.copy", "linalg.copy", "linalg.fill", "linalg.map") or op.results:
        return False
    memrefs = [v for v in op.operands if isinstance(v.type, ir.MemRefType)]
    if op.name == "linalg.fill":
        if len(op.operands) != 2 or isinstance(op.operands[0].type, ir.MemRefType):
            return False
    elif len(memrefs) != len(op.operands):
        return False
    if not memrefs or not all(_static(v.type) for v in memrefs):
        return False
    if any(str(ir.MemRefType(v.type).element_type) not in element_types for v in memrefs):
        return False   # kiln-parallelize would not split it: keep its own lowering
    shape = list(ir.MemRefType(memrefs[-1].type).shape)
    if any(list(ir.MemRefType(v.type).shape) != shape for v in memrefs):
        return False
    return prod(shape) >= min_elements


def _identity_generic(inputs: list[ir.Value], output: ir.Value) -> ir.Operation:
    rank = ir.MemRefType(output.type).rank
    identity = ir.AffineMapAttr.get(ir.AffineMap.get_identity(rank))
    op = linalg.GenericOp([], inputs, [output], ir.ArrayAttr.get([identity] * (len(inputs) + 1)),
                          ir.ArrayAttr.get([builders.iterator_type("parallel")] * rank))
    types = [ir.MemRefType(v.type).element_type for v in (*inputs, output)]
    op.regions[0].blocks.append(*types)
    return op.operation


def _rewrite(op: ir.Operation) -> None:
    with ir.InsertionPoint(op), op.location:
        if op.name in ("memref.copy", "linalg.copy"):
            src, dst = op.operands[0], op.operands[1]
            generic = _identity_generic([src], dst)
            block = generic.regions[0].blocks[0]
            with ir.InsertionPoint(block):
                linalg.YieldOp([block.arguments[0]])
        elif op.name == "linalg.fill":
            value, dst = op.operands[0], op.operands[1]
            generic = _identity_generic([], dst)
            with ir.InsertionPoint(generic.regions[0].blocks[0]):
                linalg.YieldOp([value])
        else:   # linalg.map: its mapper takes the inputs' and the init's elements, as a generic
            operands = list(op.operands)
            generic = _identity_generic(operands[:-1], operands[-1])
            old, new = op.regions[0].blocks[0], generic.regions[0].blocks[0]
            if len(old.arguments) != len(new.arguments):
                generic.erase()
                return
            for a, b in zip(old.arguments, new.arguments):
                a.replace_all_uses_with(b)
            for inner in list(old.operations):   # in order, at the end of the new body
                ir.InsertionPoint(new).insert(inner.operation.detach_from_parent())
    op.erase()


def copies_as_generics(module: ir.Module, min_elements: int, element_types: set[str]) -> None:
    """Rewrite the large static copies and fills of `element_types` into generics."""
    todo = builders.planned(
        module, ("memref.copy", "linalg.copy", "linalg.fill", "linalg.map"),
        lambda op: True if _candidate(op, min_elements, element_types) else None)
    for op, _ in todo:
        _rewrite(op)
