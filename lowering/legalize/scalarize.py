"""The step after upstream's legalization that keeps Kiln's loops free of allocations.

Upstream turns each 0-d StableHLO op (a loop's scalar state carried by Kiln's control flow,
see control_flow.py; the cloned region bodies of sort, scatter and select_and_scatter, see
loops.py) into a 0-d `linalg.generic`, which would allocate a buffer per loop iteration.
Inside the loops and branches marked SCALARIZE_ATTR, `scalarize` unwraps those generics
into their scalar bodies between tensor.extract and tensor.from_elements (canonicalize then
folds the pairs). Carried tensors of higher rank stay in place: lowering/in_place.py.
"""
from __future__ import annotations

from torch_mlir import ir
from torch_mlir.dialects import tensor

from ..ir_util import walk
from ..ir_util import clone_ops
from .loops import SCALARIZE_ATTR


def scalarize(module: ir.Module) -> None:
    loops = [o for o in walk(module.operation) if SCALARIZE_ATTR in o.attributes]
    for loop in loops:
        for g in [o for o in walk(loop) if o.name == "linalg.generic"]:
            if all(_is_0d(v.type) for v in list(g.operands) + list(g.results)) and \
                    _outputs_unread(g):
                _unwrap_generic(g)
        del loop.attributes[SCALARIZE_ATTR]


def _is_0d(t: ir.Type) -> bool:
    return isinstance(t, ir.RankedTensorType) and t.rank == 0


def _outputs_unread(g: ir.Operation) -> bool:
    # Elementwise generics only write their outputs; one that reads them is left alone.
    block = g.regions[0].blocks[0]
    n_out = len(g.results)
    return all(not list(arg.uses) for arg in list(block.arguments)[len(block.arguments) - n_out:])


def _unwrap_generic(g: ir.Operation) -> None:
    block = g.regions[0].blocks[0]
    body = [o.operation for o in block.operations]
    with ir.InsertionPoint(g), g.location:
        mapping = {arg: tensor.extract(operand, [])
                   for arg, operand in zip(block.arguments, g.operands)}
        clone_ops(body[:-1], mapping, ir.InsertionPoint(g))
        for result, value in zip(g.results, body[-1].operands):
            packed = tensor.from_elements(result.type, [mapping.get(value, value)])
            result.replace_all_uses_with(packed)
    g.erase()
