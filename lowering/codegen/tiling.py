"""Transposes in 2-D tiles, so that reads and writes both stay in cache (XLA:CPU tiles its
transposes too).

A transposing copy (`jnp.transpose(x, (2, 0, 1))`, or any elementwise op with a transposed
operand) has no loop order that walks both its input and its output contiguously: with the
output's contiguous dimension innermost (kiln-order-loops keeps it there, writes being
dearer), each read touches a new cache line, and by the time the next element of that line
is wanted the line is gone. This pass runs the op over TILE x TILE blocks of the two
dimensions involved, the output's contiguous one (innermost) and the input's contiguous one:
a block's lines, read and written, all stay in L1 while it is done.

The op itself is kept: the pass wraps it in loops over tile origins (scf.for) and runs a
clone on subviews of its operands, one block at a time; every element is computed by the
same body from the same operands, so results are bit-identical. It runs after
kiln-parallelize, so a large transpose is tiled inside each thread's chunk (the chunk's
dimension may have a dynamic extent there). Left alone: ops with reductions, indexing
other than plain dimensions, dynamic strides, small ops.
"""
from __future__ import annotations

from torch_mlir import ir
from torch_mlir.dialects import arith, memref, scf

from . import builders
from .loop_order import element_bytes, may_overlap

TILE_BYTES = 128          # a tile row: two cache lines
MIN_ELEMENTS = 1 << 14    # below this, the whole op fits in cache anyway


def _dim_maps(op: ir.Operation) -> list[list[int]] | None:
    out = []
    for attr in op.attributes["indexing_maps"]:
        dims = []
        for expr in ir.AffineMapAttr(attr).value.results:
            expr = expr.maybe_downcast()
            if not isinstance(expr, ir.AffineDimExpr):
                return None
            dims.append(expr.position)
        out.append(dims)
    return out


def _plan(op: ir.Operation):
    """(write dimension, read dimension, tile) for a transposing op, or None."""
    if op.name != "linalg.generic" or op.results or "indexing_maps" not in op.attributes:
        return None
    iterators = [str(a) for a in op.attributes["iterator_types"]]
    if len(iterators) < 2 or any("reduction" in it for it in iterators):
        return None
    maps = _dim_maps(op)
    if maps is None or may_overlap(op):   # an in-place transpose: order matters
        return None
    dynamic = ir.ShapedType.get_dynamic_stride_or_offset()
    types = []
    for v in op.operands:
        try:
            t = ir.MemRefType(v.type)
        except ValueError:
            return None
        strides, _ = t.get_strides_and_offset()
        if any(s == dynamic for s in strides) or t.rank == 0:
            return None
        types.append((t, strides))
    n_outs = list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))[1]
    if n_outs != 1:
        return None
    write = len(iterators) - 1                        # the innermost loop
    out_t, out_strides = types[-1]
    out_dims = maps[-1]
    if write not in out_dims or out_strides[out_dims.index(write)] != 1:
        return None
    if any(n != ir.ShapedType.get_dynamic_size() and n < 1 for n in out_t.shape):
        return None
    static_sizes = [n for n in out_t.shape if n != ir.ShapedType.get_dynamic_size()]
    total = 1
    for n in static_sizes:
        total *= n
    if total < MIN_ELEMENTS and len(static_sizes) == out_t.rank:
        return None
    # An input read with a large stride along `write`, contiguous along another dimension.
    for (t, strides), dims in zip(types[:-1], maps[:-1]):
        if write not in dims or len(dims) != t.rank:
            continue
        if strides[dims.index(write)] * element_bytes(t.element_type) <= 64:
            continue
        read = next((d for d, s in zip(dims, strides) if s == 1), None)
        if read is not None and read != write:
            tile = max(8, TILE_BYTES // element_bytes(t.element_type))
            return write, read, tile
    return None


def tile_transposes(module: ir.Module) -> None:
    for op, plan in builders.planned(module, ("linalg.generic",), _plan):
        with ir.InsertionPoint(op), op.location:
            _tile(op, *plan)
        op.erase()


def _tile(op: ir.Operation, write: int, read: int, tile: int) -> None:
    """Loops over the op's dimensions (outermost first): the `read` and `write` ones step by
    `tile`, the others by 1; in the innermost, the op on the block's subviews."""
    maps = _dim_maps(op)
    operands = list(op.operands)
    n_dims = len(op.attributes["iterator_types"])
    idx = builders.index()

    def constant(n):
        return arith.ConstantOp(idx, ir.IntegerAttr.get(idx, n)).result
    zero, one, step = constant(0), constant(1), constant(tile)
    # Each dimension's extent: from the first operand that it indexes.
    extents: list = [None] * n_dims
    for value, dims in zip(operands, maps):
        shape = ir.MemRefType(value.type).shape
        for k, d in enumerate(dims):
            if extents[d] is None:
                if shape[k] == ir.ShapedType.get_dynamic_size():
                    extents[d] = memref.DimOp(value, constant(k)).result
                else:
                    extents[d] = shape[k]
    tiled = (read, write)
    bounds = [e if isinstance(e, ir.Value) else constant(e) for e in extents]
    ivs, sizes = [], []

    def level(d):
        if d == n_dims:
            _block(op, operands, maps, ivs, sizes)
            return
        loop = scf.ForOp(zero, bounds[d], step if d in tiled else one)
        iv = loop.induction_variable
        with ir.InsertionPoint(loop.body):
            ivs.append(iv)
            if d not in tiled:
                sizes.append(1)
            elif isinstance(extents[d], int) and extents[d] % tile == 0:
                sizes.append(tile)
            else:   # the last block may be smaller
                sizes.append(builders.partial_block(tile, iv, bounds[d]))
            level(d + 1)
            scf.YieldOp([])
            ivs.pop()
            sizes.pop()
    level(0)


def _block(op, operands, maps, ivs, sizes) -> None:
    """A clone of `op` on the block of its operands at `ivs`, `sizes`."""
    views = []
    dynamic_size = ir.ShapedType.get_dynamic_size()
    dynamic = ir.ShapedType.get_dynamic_stride_or_offset()
    for value, dims in zip(operands, maps):
        t = ir.MemRefType(value.type)
        strides, _ = t.get_strides_and_offset()
        part = [sizes[d] for d in dims]
        shape = [s if isinstance(s, int) else dynamic_size for s in part]
        result = ir.MemRefType.get(shape, t.element_type,
                                   ir.StridedLayoutAttr.get(dynamic, strides))
        views.append(memref.subview(value, [ivs[d] for d in dims], part, [1] * t.rank,
                                    result_type=result))
    clone = op.clone()
    for i, v in enumerate(views):
        clone.operands[i] = v
