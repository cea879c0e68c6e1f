"""Reductions on the CPU: accumulators in registers, and full reductions on all cores.

`kiln-reduction-loops`: a linalg reduction whose innermost loops are reductions (a row sum,
softmax's max and sum, argmax along rows) becomes scf loops whose innermost loops carry the
outputs as loop values: one load of each output element before its reduction loop, one
store after. `convert-linalg-to-loops` instead loads and stores the output element on every
iteration, which LLVM turns back into a register only when it can prove that the output
does not alias an input; in functions outlined for threads (parallel.py) it cannot, and the
loop stays scalar and memory-bound (measured: softmax's row reductions 1.5x slower). With
the accumulator a loop value, LLVM vectorizes the loop (reassociating float combiners that
kiln-reassociate-reductions marked `reassoc`). Every output element still combines its
inputs in the same order as the linalg op's loops.

`kiln-split-reductions`: a large reduction of a whole contiguous buffer to one value (a
sum of 16M elements) has no parallel dimension to split over threads. When its body is
`combine(accumulator, f(inputs))` with a known combiner, it becomes `SplitSizes.chunks` partial
reductions (a parallel dimension that kiln-parallelize then spreads over the cores), each
starting from the combiner's identity, then one combination of the partials and of the
elements left over into the output. StableHLO leaves the order of a reduce's combinations
to the implementation (XLA:CPU splits reductions across threads too); integer combiners are
associative, so integer results are exact.

Column reductions (`x.sum(axis=0)`: the input's leading dimensions reduced, its trailing ones
kept) are split the same way along the rows: `chunks` partial rows, each reducing one
contiguous block of rows, so that each core streams its own part of memory with the partial
row in L1 (split by columns instead, as kiln-parallelize would, every core reads every row
with a strided stream: 4096x1024 f32 0.73 -> 0.60 ms on the 2-core VM).
"""
from __future__ import annotations

from dataclasses import dataclass

import math as pymath

from torch_mlir import ir
from torch_mlir.dialects import arith, linalg, memref, scf

from . import builders
from ..ir_util import operand_segments
from .loop_order import base_buffer, element_bytes, may_overlap

# Partial results of a split reduction: enough chunks to balance two or more threads.
@dataclass(frozen=True)
class SplitSizes:
    """How finely kiln-split-reductions splits: `chunks` partials, for reductions of at least
    `min_elements` elements. The GPU target splits the same way, into many more partials
    (lowering/gpu/loops.py)."""
    chunks: int = 16
    min_elements: int = 1 << 18   # below this, one core reduces faster than threads hand off


CPU_SPLIT = SplitSizes()


def _maps(op: ir.Operation) -> list[ir.AffineMap]:
    return [ir.AffineMapAttr(m).value for m in op.attributes["indexing_maps"]]


def _extents(op: ir.Operation) -> list[tuple[ir.Value, int, int]] | None:
    """Each iteration dimension's extent as (operand, its dimension, static size or dynamic),
    from an operand indexed by it directly, a static one where there is one (in a thread's
    chunk, parallel.py, one dimension has a dynamic extent)."""
    n_dims = len(op.attributes["iterator_types"])
    dynamic = ir.ShapedType.get_dynamic_size()
    extent: list = [None] * n_dims
    for value, amap in zip(op.operands, _maps(op)):
        try:
            t = ir.MemRefType(value.type)
        except ValueError:
            return None
        for k, (expr, n) in enumerate(zip(amap.results, t.shape)):
            expr = expr.maybe_downcast()
            if isinstance(expr, ir.AffineDimExpr):
                known = extent[expr.position]
                if known is None or (known[2] == dynamic and n != dynamic):
                    extent[expr.position] = (value, k, n)
    return None if any(e is None for e in extent) else extent


# -- kiln-reduction-loops ---------------------------------------------------------------

def reduction_loops(module: ir.Module) -> None:
    todo = []

    def visit(op):
        op = op.operation
        if op.name == "linalg.generic" and _innermost_reductions(op):
            todo.append(op)
        return ir.WalkResult.ADVANCE
    module.operation.walk(visit)
    for op in todo:
        with ir.InsertionPoint(op), op.location:
            _emit_loops(op)
        op.erase()


def _innermost_reductions(op: ir.Operation) -> int:
    """How many trailing dimensions of `op` are reductions (0: not an op for this pass)."""
    if op.results or "indexing_maps" not in op.attributes:
        return 0
    iterators = [str(a) for a in op.attributes["iterator_types"]]
    trailing = 0
    while trailing < len(iterators) and "reduction" in iterators[-1 - trailing]:
        trailing += 1
    if trailing == 0 or _extents(op) is None or may_overlap(op):
        return 0
    n_ins, n_outs = operand_segments(op)
    if n_outs == 0:
        return 0
    # An input over an output's buffer would read the accumulator, which now lives in a
    # register until the loop ends.
    operands = list(op.operands)
    if any(base_buffer(operands[i]) == base_buffer(operands[o])
           for i in range(n_ins) for o in range(n_ins, n_ins + n_outs)):
        return 0
    # Outputs are indexed by the outer dimensions only (a linalg invariant; checked anyway).
    outer = len(iterators) - trailing
    for amap in _maps(op)[n_ins:]:
        for expr in amap.results:
            for d in range(outer, len(iterators)):
                if builders.uses_dim(expr, d):
                    return 0
    return trailing


def _emit_loops(op: ir.Operation) -> None:
    """At the insertion point: the loops of `op`, outer ones plain, the trailing reduction
    ones carrying the outputs; `op`'s body is moved into the innermost loop."""
    n_ins, n_outs = operand_segments(op)
    extents = _extents(op)
    n_dims = len(extents)
    outer = n_dims - _innermost_reductions(op)
    maps = _maps(op)
    operands = list(op.operands)
    idx = builders.index()

    def constant(n):
        return arith.ConstantOp(idx, ir.IntegerAttr.get(idx, n)).result
    zero, one = constant(0), constant(1)
    bounds = [memref.DimOp(value, constant(k)).result if n == ir.ShapedType.get_dynamic_size()
              else constant(n) for value, k, n in extents]
    ivs: list[ir.Value] = []

    def parallel_level(d):
        if d == outer:
            outs = operands[n_ins:]
            places = [builders.indices_of(m, ivs) for m in maps[n_ins:]]
            accumulators = [memref.LoadOp(v, p).result for v, p in zip(outs, places)]
            results = reduction_level(d, accumulators)
            for value, buffer, place in zip(results, outs, places):
                memref.StoreOp(value, buffer, place)
            return
        loop = scf.ForOp(zero, bounds[d], one)
        ivs.append(loop.induction_variable)
        with ir.InsertionPoint(loop.body):
            parallel_level(d + 1)
            scf.YieldOp([])
        ivs.pop()

    def reduction_level(d, accumulators):
        loop = scf.ForOp(zero, bounds[d], one, accumulators)
        ivs.append(loop.induction_variable)
        carried = list(loop.inner_iter_args)
        with ir.InsertionPoint(loop.body):
            if d + 1 < n_dims:
                scf.YieldOp(reduction_level(d + 1, carried))
            else:
                scf.YieldOp(_inline_body(op, ivs, carried, n_ins, maps, operands))
        ivs.pop()
        return list(loop.results)

    parallel_level(0)


def _inline_body(op, ivs, carried, n_ins, maps, operands) -> list[ir.Value]:
    """Move `op`'s body to the insertion point: inputs loaded at `ivs`, outputs = `carried`,
    linalg.index = the loop index; returns the values it yields."""
    body = op.regions[0].blocks[0]
    args = list(body.arguments)
    for k in range(n_ins):
        loaded = memref.LoadOp(operands[k], builders.indices_of(maps[k], ivs)).result
        args[k].replace_all_uses_with(loaded)
    for arg, value in zip(args[n_ins:], carried):
        arg.replace_all_uses_with(value)
    indices = []

    def find(inner):   # also inside nested regions (an scf.if in the body)
        if inner.operation.name == "linalg.index":
            indices.append(inner.operation)
        return ir.WalkResult.ADVANCE
    for inner in body.operations:
        inner.operation.walk(find)
    for inner in indices:
        inner.results[0].replace_all_uses_with(ivs[ir.IntegerAttr(inner.attributes["dim"]).value])
        inner.erase()
    anchor = arith.ConstantOp(builders.index(), ir.IntegerAttr.get(builders.index(), 0))
    yielded = []
    for inner in list(body.operations):
        inner = inner.operation
        if inner.name == "linalg.yield":
            yielded = list(inner.operands)
            break
        inner.move_before(anchor.operation)
    anchor.operation.erase()
    return yielded


# -- kiln-split-reductions --------------------------------------------------------------

def _identity(combiner: str, t: ir.Type) -> ir.Attribute | None:
    """The value x with combiner(x, y) == y for every y of type `t` (None: unknown)."""
    if combiner in _FLOAT_IDENTITY:
        if str(t) not in ("f16", "bf16", "f32", "f64"):
            return None
        return ir.FloatAttr.get(t, _FLOAT_IDENTITY[combiner])
    if combiner not in _INT_IDENTITY:
        return None
    try:
        width = ir.IntegerType(t).width
    except ValueError:
        return None
    value = _INT_IDENTITY[combiner](width)
    if value >= 1 << (width - 1):      # as the signed value with those bits
        value -= 1 << width
    return ir.IntegerAttr.get(t, value)


# -0.0 is the additive identity: -0.0 + -0.0 stays -0.0, as the serial sum would.
_FLOAT_IDENTITY = {"arith.addf": -0.0, "arith.mulf": 1.0, "arith.maximumf": -pymath.inf,
                   "arith.minimumf": pymath.inf, "arith.maxnumf": -pymath.inf,
                   "arith.minnumf": pymath.inf}
_INT_IDENTITY = {"arith.addi": lambda w: 0, "arith.muli": lambda w: 1,
                 "arith.ori": lambda w: 0, "arith.xori": lambda w: 0,
                 "arith.andi": lambda w: (1 << w) - 1,
                 "arith.maxsi": lambda w: 1 << (w - 1), "arith.minsi": lambda w: (1 << (w - 1)) - 1,
                 "arith.maxui": lambda w: 0, "arith.minui": lambda w: (1 << w) - 1}


def _full_reduction(op: ir.Operation, sizes: SplitSizes):
    """(combiner op, input type, N) for a large 1-input reduction of a whole contiguous
    buffer to a 0-d output whose body is combiner(accumulator, f(input)); else None."""
    if op.name != "linalg.generic" or op.results or operand_segments(op) != (1, 1):
        return None
    iterators = [str(a) for a in op.attributes["iterator_types"]]
    if not iterators or any("reduction" not in it for it in iterators):
        return None
    source, target = op.operands
    try:
        t, out_t = ir.MemRefType(source.type), ir.MemRefType(target.type)
    except ValueError:
        return None
    in_map, out_map = _maps(op)
    if not t.has_static_shape or out_t.rank != 0 or in_map != ir.AffineMap.get_identity(t.rank) \
            or not _row_major(t):
        return None
    n = pymath.prod(t.shape)
    if n < sizes.min_elements:
        return None
    combiner = _combiner(op, out_t.element_type)
    return None if combiner is None else (combiner, t, n, sizes.chunks)


def _combiner(op: ir.Operation, element: ir.Type) -> ir.Operation | None:
    """The op of `op`'s body that yields combiner(accumulator, f(input)), for a combiner with
    a known identity, the accumulator used by nothing else; else None."""
    body = op.regions[0].blocks[0]
    accumulator = body.arguments[1]
    yielded = list(body.operations)[-1].operands[0]
    combiner = yielded.owner
    if not isinstance(combiner, ir.OpView) and not isinstance(combiner, ir.Operation):
        return None
    combiner = getattr(combiner, "operation", combiner)
    if combiner.parent != op or _identity(combiner.name, element) is None \
            or may_overlap(op):
        return None
    operands = list(combiner.operands)
    if len(operands) != 2 or accumulator not in operands:
        return None
    # the accumulator feeds the combiner and nothing else
    if sum(1 for _ in accumulator.uses) != 1 or operands[0] == operands[1]:
        return None
    return combiner


def _row_major(t: ir.MemRefType) -> bool:
    return builders.has_row_major_strides(t) and str(t.layout).startswith("affine_map")


def split_reductions(module: ir.Module, sizes: SplitSizes = CPU_SPLIT) -> None:
    def full_reduction(op):
        with op.location:   # identity attributes are built (and checked) here
            full = _full_reduction(op, sizes)
            return ("full", full) if full is not None else \
                ("columns", _column_reduction(op, sizes))
    for op, (kind, plan) in builders.planned(module, ("linalg.generic",), full_reduction):
        if plan is None:
            continue
        with ir.InsertionPoint(op), op.location:
            (_split if kind == "full" else _split_columns)(op, *plan)
        op.erase()


def _generic_like(op: ir.Operation, source: ir.Value, target: ir.Value, maps, iterators):
    """A clone of `op` (its body) on other operands, maps and iterators."""
    clone = op.clone()
    clone.operands[0], clone.operands[1] = source, target
    clone.attributes["indexing_maps"] = ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in maps])
    clone.attributes["iterator_types"] = ir.ArrayAttr.get(
        [builders.iterator_type(it) for it in iterators])
    return clone


def _split(op: ir.Operation, combiner: ir.Operation, t: ir.MemRefType, n: int,
           chunks: int) -> None:
    source, target = op.operands
    element = t.element_type
    chunk = n // chunks
    flat = source
    if t.rank != 1:
        flat = memref.collapse_shape(ir.MemRefType.get([n], element), source,
                                     ir.ArrayAttr.get([ir.ArrayAttr.get(
                                         [ir.IntegerAttr.get(ir.IntegerType.get_signless(64), k)
                                          for k in range(t.rank)])]))
    head_t = ir.MemRefType.get([chunks * chunk], element)
    head = memref.subview(flat, [0], [chunks * chunk], [1], result_type=head_t)
    rows_t = ir.MemRefType.get([chunks, chunk], element)
    i64 = ir.IntegerType.get_signless(64)
    rows = memref.expand_shape(rows_t, head, ir.ArrayAttr.get([ir.ArrayAttr.get(
        [ir.IntegerAttr.get(i64, 0), ir.IntegerAttr.get(i64, 1)])]), [], [chunks, chunk])
    out_element = ir.MemRefType(target.type).element_type
    partials = memref.AllocaOp(ir.MemRefType.get([chunks], out_element), [], []).result
    identity = arith.ConstantOp(out_element, _identity(combiner.name, out_element)).result
    linalg.fill(identity, outs=[partials])
    d0, d1 = ir.AffineExpr.get_dim(0), ir.AffineExpr.get_dim(1)
    _generic_like(op, rows, partials, [ir.AffineMap.get(2, 0, [d0, d1]),
                                       ir.AffineMap.get(2, 0, [d0])],
                  ["parallel", "reduction"])
    # the partials, then the elements past the last whole chunk, into the output
    _combine(combiner, partials, target)
    if n > chunks * chunk:
        tail_t = ir.MemRefType.get([n - chunks * chunk], element,
                                   ir.StridedLayoutAttr.get(chunks * chunk, [1]))
        tail = memref.subview(flat, [chunks * chunk], [n - chunks * chunk], [1],
                              result_type=tail_t)
        _generic_like(op, tail, target, [ir.AffineMap.get(1, 0, [d0]), ir.AffineMap.get(1, 0, [])],
                      ["reduction"])


def _combine(combiner: ir.Operation, partials: ir.Value, target: ir.Value) -> None:
    """target = combiner(target, partials[0], partials[1], ...), in that order (partials
    [chunks] into a scalar, or [chunks, N] into N columns)."""
    element = ir.MemRefType(target.type).element_type
    rank = ir.MemRefType(partials.type).rank
    dims = [ir.AffineExpr.get_dim(k) for k in range(rank)]
    op = linalg.GenericOp([], [partials], [target],
                          ir.ArrayAttr.get([ir.AffineMapAttr.get(ir.AffineMap.get(rank, 0, dims)),
                                            ir.AffineMapAttr.get(ir.AffineMap.get(
                                                rank, 0, dims[1:]))]),
                          ir.ArrayAttr.get([builders.iterator_type("reduction")] +
                                           [builders.iterator_type("parallel")] * (rank - 1)))
    block = op.regions[0].blocks.append(element, element)
    with ir.InsertionPoint(block):
        attributes = {a.name: a.attr for a in
                      (combiner.attributes[i] for i in range(len(combiner.attributes)))}
        value = ir.Operation.create(combiner.name, results=[element],
                                    operands=[block.arguments[1], block.arguments[0]],
                                    attributes=attributes).result
        linalg.YieldOp([value])


# -- column reductions: x.sum(axis=0) ---------------------------------------------------

MAX_PARTIAL_BYTES = 1 << 20   # the partial rows of the columns: they stay in L2


def _column_reduction(op: ir.Operation, sizes: SplitSizes):
    """(combiner, input type, leading reduction dimensions) for a large 1-input reduction
    whose reduction dimensions lead and whose kept dimensions are the input's trailing ones
    (a column sum after kiln-order-loops: rows added into the output, row after row), on
    row-major buffers; else None."""
    if op.name != "linalg.generic" or op.results or operand_segments(op) != (1, 1):
        return None
    iterators = [str(a) for a in op.attributes["iterator_types"]]
    reduced = {d for d, it in enumerate(iterators) if "reduction" in it}
    k, n = len(reduced), len(iterators)
    source, target = op.operands
    try:
        t, out_t = ir.MemRefType(source.type), ir.MemRefType(target.type)
    except ValueError:
        return None
    in_dims, out_dims = (_plain_dims(m) for m in _maps(op))
    # whatever the loop order: the input's leading dimensions are reduced, its trailing
    # ones are the output's, in the output's order
    if k == 0 or k == n or in_dims is None or out_dims is None or t.rank != n or \
            set(in_dims[:k]) != reduced or in_dims[k:] != out_dims or \
            not t.has_static_shape or not out_t.has_static_shape or \
            not _row_major(t) or not _row_major(out_t) or _reads_index(op):
        return None
    rows = pymath.prod(t.shape[:k])
    columns = pymath.prod(t.shape[k:])
    width = max(1, element_bytes(out_t.element_type))
    if rows * columns < sizes.min_elements or rows < 4 * sizes.chunks or \
            sizes.chunks * columns * width > MAX_PARTIAL_BYTES:
        return None
    combiner = _combiner(op, out_t.element_type)
    return None if combiner is None else (combiner, t, k, sizes.chunks)


def _split_columns(op: ir.Operation, combiner: ir.Operation, t: ir.MemRefType, k: int,
                   chunks: int) -> None:
    """Column reductions by blocks of rows: chunks partial rows, each the reduction of one
    contiguous block of rows (a parallel dimension: kiln-parallelize spreads the blocks
    over the cores, each streaming its own part of memory), then the partial rows and the
    rows left over combined into the output. (Split by columns, each core would read every
    row, half of it, with its own strided stream.)"""
    source, target = op.operands
    element = t.element_type
    rows, columns = pymath.prod(t.shape[:k]), pymath.prod(t.shape[k:])
    i64 = ir.IntegerType.get_signless(64)

    def group(ks):
        return ir.ArrayAttr.get([ir.IntegerAttr.get(i64, x) for x in ks])
    flat = source
    if t.rank != 2:
        flat = memref.collapse_shape(ir.MemRefType.get([rows, columns], element), source,
                                     ir.ArrayAttr.get([group(range(k)),
                                                       group(range(k, t.rank))]))
    out = target
    out_t = ir.MemRefType(target.type)
    if out_t.rank != 1:
        out = memref.collapse_shape(ir.MemRefType.get([columns], out_t.element_type), target,
                                    ir.ArrayAttr.get([group(range(out_t.rank))]))
    chunk = rows // chunks
    head = memref.subview(flat, [0, 0], [chunks * chunk, columns], [1, 1],
                          result_type=ir.MemRefType.get([chunks * chunk, columns], element))
    blocks = memref.expand_shape(ir.MemRefType.get([chunks, chunk, columns], element), head,
                                 ir.ArrayAttr.get([group([0, 1]), group([2])]), [],
                                 [chunks, chunk, columns])
    out_element = out_t.element_type
    partials = memref.AllocOp(ir.MemRefType.get([chunks, columns], out_element), [], [],
                              alignment=64).result
    identity = arith.ConstantOp(out_element, _identity(combiner.name, out_element)).result
    linalg.fill(identity, outs=[partials])
    d0, d1, d2 = (ir.AffineExpr.get_dim(x) for x in range(3))
    _generic_like(op, blocks, partials, [ir.AffineMap.get(3, 0, [d0, d1, d2]),
                                         ir.AffineMap.get(3, 0, [d0, d2])],
                  ["parallel", "reduction", "parallel"])
    _combine(combiner, partials, out)
    if rows > chunks * chunk:
        rest = rows - chunks * chunk
        tail_t = ir.MemRefType.get([rest, columns], element,
                                   ir.StridedLayoutAttr.get(chunks * chunk * columns,
                                                            [columns, 1]))
        tail = memref.subview(flat, [chunks * chunk, 0], [rest, columns], [1, 1],
                              result_type=tail_t)
        _generic_like(op, tail, out, [ir.AffineMap.get(2, 0, [d0, d1]),
                                      ir.AffineMap.get(2, 0, [d1])], ["reduction", "parallel"])
    memref.DeallocOp(partials)


def _plain_dims(amap: ir.AffineMap) -> list[int] | None:
    out = []
    for expr in amap.results:
        expr = expr.maybe_downcast()
        if not isinstance(expr, ir.AffineDimExpr):
            return None
        out.append(expr.position)
    return out


def _reads_index(op: ir.Operation) -> bool:
    """Whether the body reads linalg.index (the split renumbers the dimensions)."""
    found = []

    def visit(inner):
        if inner.operation.name == "linalg.index":
            found.append(inner)
        return ir.WalkResult.ADVANCE
    for inner in op.regions[0].blocks[0].operations:
        inner.operation.walk(visit)
    return bool(found)
