"""stablehlo.scatter -> one parallel loop, a thread per update element (the GPU target; the
shared lowering, lowering/legalize/scatter.py, applies the updates one at a time in one
thread).

Parallel application is only correct where the order in which updates reach one operand
element cannot matter, or where the program says no two updates meet:
- the combiner is add, max, min, or or and of a 32- or 64-bit element (the GPU has atomics
  for them): each thread combines its update into the result with an atomic read-modify-
  write (memref.atomic_rmw; float max/min, which must propagate NaN as stablehlo.maximum
  does, with a compare-and-swap loop, memref.generic_atomic_rmw). Duplicates then combine
  in an unspecified order: exact for integers; for float add, rounding may differ from the
  serial order, as on XLA's GPU backend;
- `unique_indices` is set: no two updates meet, so each thread reads, combines (the op's
  own region, any computation) and writes its element with no atomic;
- the combiner just replaces (returns the update): each thread stores its update. With
  duplicate indices the winner is then unspecified, which StableHLO and JAX allow ("updates
  to the same index may be applied in any order"); XLA's GPU scatter does the same. Only
  single-operand scatters take this path, so the operands of one update never mix with
  another's.
Any other scatter is left to the shared serial lowering.

The loop writes a copy of the operand through its buffer, made at the tensor level:

    %copy = bufferization.alloc_tensor() copy(%operand)
    %buffer = bufferization.to_buffer %copy
    scf.parallel (%t) = (0) to (positions * window elements) { ... store / atomic ... }
    %result = bufferization.to_tensor %buffer restrict writable

An update whose window does not lie wholly inside the operand is skipped (XLA's rule, as
the shared lowering). Unsigned elements are scattered as the signless integers of their
width (bitcasts around the loop), so that the buffer and the arithmetic are signless.
"""
from __future__ import annotations

from math import prod

from torch_mlir import ir
from torch_mlir.dialects import arith, bufferization, memref, scf, tensor

from ..legalize.loops import (SCALARIZE_ATTR, IndexConstants, apply_region, clone_region_body,
                              delinearize)
from ..legalize.scatter import ScatterGeometry
from ..patterns import pattern_pass, replace_op

# combiner op -> atomic kind (float, signed integer, unsigned integer); None: a CAS loop
_ATOMIC_KINDS = {
    "stablehlo.add": ("addf", "addi", "addi"),
    "stablehlo.maximum": (None, "maxs", "maxu"),
    "stablehlo.minimum": (None, "mins", "minu"),
    "stablehlo.or": (None, "ori", "ori"),
    "stablehlo.and": (None, "andi", "andi"),
}
_FLOAT_CAS = {"stablehlo.maximum": arith.maximumf, "stablehlo.minimum": arith.minimumf}


def _combiner(region: ir.Region) -> tuple[str, str | None]:
    """How the update computation combines (old, update): ("replace", None) when it
    returns the update, ("op", name) for one StableHLO op of both, else ("other", None)."""
    if len(region.blocks) != 1:
        return "other", None
    block = region.blocks[0]
    args = list(block.arguments)
    ops = [o.operation for o in block.operations]
    if len(args) != 2 or not ops:
        return "other", None
    returned = list(ops[-1].operands)
    if len(ops) == 1 and len(returned) == 1 and returned[0] == args[1]:
        return "replace", None
    if len(ops) == 2 and len(returned) == 1 and returned[0] == ops[0].results[0] and \
            sorted(map(_arg_number, ops[0].operands)) == [0, 1]:
        return "op", ops[0].name
    return "other", None


def _arg_number(value: ir.Value) -> int:
    try:
        return ir.BlockArgument(value).arg_number
    except ValueError:
        return -1


def _atomic_kind(op_name: str, element: ir.Type) -> tuple[str, str | None] | None:
    """("atomic", kind) or ("cas", op name) for a combiner op on `element`, when the GPU has
    an atomic for it; else None."""
    kinds = _ATOMIC_KINDS.get(op_name)
    if kinds is None:
        return None
    if isinstance(element, (ir.F32Type, ir.F64Type)):
        if kinds[0] is not None:
            return "atomic", kinds[0]
        return ("cas", op_name) if op_name in _FLOAT_CAS else None
    if isinstance(element, ir.IntegerType) and ir.IntegerType(element).width in (32, 64):
        unsigned = ir.IntegerType(element).is_unsigned
        return "atomic", kinds[2 if unsigned else 1]
    return None


def _plain_element(element: ir.Type) -> bool:
    """Elements a thread can store on its own: integers and 16- to 64-bit floats (not
    complex; narrow floats are computed in f32 by a later step of the shared stage)."""
    return isinstance(element, (ir.IntegerType, ir.F16Type, ir.BF16Type, ir.F32Type,
                                ir.F64Type))


def _signless(element: ir.Type) -> ir.Type:
    if isinstance(element, ir.IntegerType) and not ir.IntegerType(element).is_signless:
        return ir.IntegerType.get_signless(ir.IntegerType(element).width)
    return element


def _bitcast(value: ir.Value, element: ir.Type) -> ir.Value:
    t = ir.RankedTensorType(value.type)
    if t.element_type == element:
        return value
    return ir.Operation.create("stablehlo.bitcast_convert", operands=[value], results=[
        ir.RankedTensorType.get(list(t.shape), element)]).result


def _static(value: ir.Value) -> bool:
    return isinstance(value.type, ir.RankedTensorType) and \
        ir.RankedTensorType(value.type).has_static_shape


def _strategy(op: ir.Operation, n: int) -> tuple[str, object] | None:
    """How the updates of `op` can be applied in parallel, or None."""
    elements = [ir.RankedTensorType(v.type).element_type for v in list(op.operands)[:n]]
    if not all(_plain_element(e) for e in elements):
        return None
    form, name = _combiner(op.regions[0]) if n == 1 else ("other", None)
    if n == 1 and form == "op":
        atomic = _atomic_kind(name, elements[0])
        if atomic is not None:
            return atomic
    unique = "unique_indices" in op.attributes and \
        ir.BoolAttr(op.attributes["unique_indices"]).value
    if unique:
        return "unique", None
    if n == 1 and form == "replace":
        return "replace", None
    return None


def _lower(op: ir.Operation) -> bool | None:
    n = len(op.results)
    operands = list(op.operands)
    if not all(_static(v) for v in operands):
        return False
    strategy = _strategy(op, n)
    if strategy is None:
        return False
    inputs, indices, updates = operands[:n], operands[n], operands[n + 1:]
    shape = list(ir.RankedTensorType(inputs[0].type).shape)
    index_shape = list(ir.RankedTensorType(indices.type).shape)
    geometry = ScatterGeometry.read(op, shape, list(ir.RankedTensorType(updates[0].type).shape),
                                    len(index_shape))
    if geometry is None:
        return False  # the shared lowering reports the malformed op
    window_shape, scatter_shape = geometry.window_shape, geometry.scatter_shape
    total = prod(scatter_shape) * prod(window_shape)
    if total == 0:
        return False  # nothing to apply: the shared lowering forwards the operands

    originals = [ir.RankedTensorType(v.type).element_type for v in inputs]
    elements = [_signless(e) for e in originals]
    with ir.InsertionPoint(op), op.location:
        index = IndexConstants()
        c0 = index(0)
        i64 = ir.IntegerType.get_signless(64)
        idx = indices
        if ir.RankedTensorType(indices.type).element_type != i64:
            # as the shared lowering: huge unsigned indices turn negative, and are skipped
            idx = ir.Operation.create("stablehlo.convert", operands=[indices], results=[
                ir.RankedTensorType.get(index_shape, i64)]).result
        ups = [_bitcast(u, e) for u, e in zip(updates, elements)]
        buffers = []
        for value, element in zip(inputs, elements):
            copy = bufferization.AllocTensorOp(
                ir.RankedTensorType.get(shape, element), [], copy=_bitcast(value, element))
            buffers.append(bufferization.ToBufferOp(
                ir.MemRefType.get(shape, element), copy.result).result)

        loop = scf.ParallelOp([], [c0], [index(total)], [index(1)], [])
        body = loop.regions[0].blocks.append(ir.IndexType.get())
        with ir.InsertionPoint(body):
            flat = body.arguments[0]
            coords = delinearize(index, flat, scatter_shape + window_shape)
            scatter_coords = coords[:len(scatter_shape)]
            window_coords = coords[len(scatter_shape):]
            start = geometry.start(index, idx, scatter_coords)
            inside = scf.IfOp(geometry.inside(index, start))
            with ir.InsertionPoint(inside.then_block):
                target = geometry.operand_index(c0, start, window_coords)
                source = geometry.update_index(scatter_coords, window_coords)
                news = [tensor.extract(u, source) for u in ups]
                _apply(op, strategy, buffers, target, news, elements)
                scf.YieldOp([])
            scf.ReduceOp([], 0)
        if strategy[0] == "unique":
            # the region's 0-d StableHLO ops become scalar code (legalize/scalarize.py)
            loop.operation.attributes[SCALARIZE_ATTR] = ir.UnitAttr.get()
        results = [_bitcast(bufferization.ToTensorOp(ir.RankedTensorType.get(shape, e), b,
                                                      restrict=True, writable=True).result, o)
                   for b, e, o in zip(buffers, elements, originals)]
    replace_op(op, results)
    return None


def _apply(op: ir.Operation, strategy: tuple[str, object], buffers: list[ir.Value],
           target: list[ir.Value], news: list[ir.Value], elements: list[ir.Type]) -> None:
    """One thread's update of the element at `target`."""
    kind, detail = strategy
    if kind == "atomic":
        memref.AtomicRMWOp(arith.AtomicRMWKind[detail], news[0], buffers[0], target)
    elif kind == "cas":
        cas = memref.GenericAtomicRMWOp(elements[0], buffers[0], target)
        block = cas.regions[0].blocks.append(elements[0])
        with ir.InsertionPoint(block):
            memref.AtomicYieldOp(_FLOAT_CAS[detail](block.arguments[0], news[0]))
    elif kind == "replace":
        memref.StoreOp(news[0], buffers[0], target)
    else:  # unique indices: read, combine with the op's own region, write
        olds = [memref.LoadOp(b, target).result for b in buffers]
        combined = _combine(op, olds, news, elements)
        for value, buffer in zip(combined, buffers):
            memref.StoreOp(value, buffer, target)


def _combine(op: ir.Operation, olds: list[ir.Value], news: list[ir.Value],
             elements: list[ir.Type]) -> list[ir.Value]:
    """The update computation on signless scalars; the region sees its own element types
    (unsigned ones through bitcasts of the 0-d tensors)."""
    block = op.regions[0].blocks[0]
    wanted = [ir.RankedTensorType(a.type).element_type for a in block.arguments]
    originals = wanted[:len(olds)]
    if all(o == e for o, e in zip(originals, elements)):
        return apply_region(op.regions[0], olds + news, elements)
    wrapped = []
    for v, want in zip(olds + news, wanted):
        packed = tensor.from_elements(ir.RankedTensorType.get([], v.type), [v])
        wrapped.append(_bitcast(packed, want))
    returned = clone_region_body(op.regions[0], wrapped)
    return [tensor.extract(_bitcast(v, e), []) for v, e in zip(returned, elements)]


parallel_scatters = pattern_pass({"stablehlo.scatter": _lower})
