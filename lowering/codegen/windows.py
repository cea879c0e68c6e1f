"""Small windows unrolled into the body of a reduce_window generic (pooling).

Upstream lowers a reduce_window to a linalg.generic over (output dims, window dims), the
input indexed by `h * stride + kh * dilation` and a window-shaped dummy operand giving the
window dims their extents. In loops that is, per output element, one load and one store of
the accumulator per window position: for an NHWC 3x3 pool, nine passes over each 64-channel
output vector. XLA instead loads the window's nine inputs and adds them in registers.

This rewrite does the same in linalg: a generic over the output dims alone whose body
starts from the output element, loads each window position's input (`memref.load` at
indices computed with `affine.apply`, window dims replaced by constants) and applies the
original body to it, window positions in the original loop order. Every output element
accumulates the same values in the same order, so results are bit-identical; the loads read
a buffer no output shares (checked), which kiln-parallelize then captures and splits along
the outermost output dim, and whose innermost (contiguous) loop LLVM vectorizes.

Only static windows of at most MAX_WINDOW positions, single-output ops whose reduction
dims appear only inside compound input indices or in operands indexed by window dims alone,
bodies without regions or `linalg.index`, at the top level of a function.
"""
from __future__ import annotations

import itertools

from torch_mlir import ir
from torch_mlir.dialects import affine, linalg, memref

from . import builders
from .loop_order import base_buffer

MAX_WINDOW = 16


def _expr_dims(expr) -> set[int]:
    expr = expr.maybe_downcast()
    if isinstance(expr, ir.AffineDimExpr):
        return {expr.position}
    if isinstance(expr, ir.AffineBinaryExpr):
        return _expr_dims(expr.lhs) | _expr_dims(expr.rhs)
    return set()


def _plan(op: ir.Operation):
    if op.results or op.parent is None or op.parent.name != "func.func":
        return None
    outputs = list(op.opview.outputs)
    if len(outputs) != 1:
        return None
    operands = list(op.operands)
    maps = [ir.AffineMapAttr(a).value for a in op.attributes["indexing_maps"]]
    iterators = [str(a) for a in op.attributes["iterator_types"]]
    reductions = [d for d, it in enumerate(iterators) if "reduction" in it]
    parallel = [d for d in range(len(iterators)) if d not in reductions]
    if not reductions or not parallel:
        return None
    for v in operands:
        if not isinstance(v.type, ir.MemRefType) or not ir.MemRefType(v.type).has_static_shape:
            return None
    extent, windowed, dummies = {}, [], []
    for k, (v, m) in enumerate(zip(operands, maps)):
        exprs = [e.maybe_downcast() for e in m.results]
        for e, n in zip(exprs, ir.MemRefType(v.type).shape):
            if isinstance(e, ir.AffineDimExpr):
                extent[e.position] = n
        if k == len(operands) - 1:
            if any(not isinstance(e, ir.AffineDimExpr) or e.position in reductions
                   for e in exprs):
                return None   # the output: plain parallel dims only
            continue
        dims = set().union(*(_expr_dims(e) for e in exprs)) if exprs else set()
        if dims and dims <= set(reductions):
            dummies.append(k)          # the window-shaped operand: extents only
        elif any(isinstance(e, ir.AffineDimExpr) and e.position in reductions for e in exprs):
            return None                # a plain index of a reduction dim: a convolution
        else:
            windowed.append(k)
    if not windowed or len(extent) != len(iterators):
        return None
    window = 1
    for d in reductions:
        window *= extent[d]
    if window > MAX_WINDOW or window == 0:
        return None
    body = op.regions[0].blocks[0]
    for k in dummies:
        if len(list(body.arguments[k].uses)):
            return None
    for inner in body.operations:
        inner = inner.operation
        if len(inner.regions) or inner.name == "linalg.index":
            return None
    out_root = base_buffer(outputs[0])
    if any(base_buffer(operands[k]) == out_root for k in windowed):
        return None
    return {"maps": maps, "parallel": parallel, "reductions": reductions,
            "extent": extent, "windowed": windowed}


def _unroll(op: ir.Operation, plan) -> None:
    parallel, reductions = plan["parallel"], plan["reductions"]
    n_dims = len(parallel) + len(reductions)
    operands = list(op.operands)
    out = operands[-1]
    out_map = plan["maps"][-1]
    position = {d: k for k, d in enumerate(parallel)}
    new_out_map = ir.AffineMap.get(len(parallel), 0, [
        ir.AffineExpr.get_dim(position[e.maybe_downcast().position]) for e in out_map.results])
    element = ir.MemRefType(out.type).element_type
    old_body = op.regions[0].blocks[0]
    with ir.InsertionPoint(op), op.location:
        generic = linalg.GenericOp(
            [], [], [out], ir.ArrayAttr.get([ir.AffineMapAttr.get(new_out_map)]),
            ir.ArrayAttr.get([builders.iterator_type("parallel")] * len(parallel)))
        block = generic.regions[0].blocks.append(element)
        with ir.InsertionPoint(block):
            indices = [linalg.IndexOp(ir.IntegerAttr.get(builders.i64(), k)).result
                       for k in range(len(parallel))]
            constants = builders.Constants(block)
            acc = block.arguments[0]
            ranges = [range(plan["extent"][d]) for d in reductions]
            for point in itertools.product(*ranges):   # the original order: last dim fastest
                dims = [None] * n_dims
                for d, k in position.items():
                    dims[d] = indices[k]
                for d, i in zip(reductions, point):
                    dims[d] = constants(i, builders.index())
                mapping = [(old_body.arguments[len(operands) - 1], acc)]
                for k in plan["windowed"]:
                    at = [affine.apply(ir.AffineMap.get(n_dims, 0, [e]), dims)
                          for e in plan["maps"][k].results]
                    mapping.append((old_body.arguments[k], memref.load(operands[k], at)))
                acc = _apply_body(old_body, mapping)
            linalg.YieldOp([acc])
    op.erase()


def _apply_body(body: ir.Block, mapping: list) -> ir.Value:
    """Clone the body's ops at the insertion point with `mapping` ((old, new) value pairs)
    for its arguments; the yielded value."""
    mapping = list(mapping)

    def mapped(v: ir.Value) -> ir.Value:
        return next((new for old, new in mapping if old == v), v)
    for inner in body.operations:
        inner = inner.operation
        if inner.name == "linalg.yield":
            return mapped(inner.operands[0])
        clone = inner.clone()
        for i, v in enumerate(clone.operands):
            clone.operands[i] = mapped(v)
        mapping.extend(zip(inner.results, clone.results))
    raise AssertionError("a linalg body ends in linalg.yield")


def unroll_windows(module: ir.Module) -> None:
    for op, plan in builders.planned(module, ("linalg.generic",), _plan):
        _unroll(op, plan)
