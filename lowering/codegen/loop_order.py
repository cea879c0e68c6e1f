"""Loop order for locality: permute each linalg.generic's iteration dimensions so that its
loops walk memory the way it is laid out (XLA:CPU's emitters pick the loop order from the
layout too).

`convert-linalg-to-loops` nests loops in the order of the op's dimensions, which is the
order of the *output's* dimensions. For a column sum (`x.sum(axis=0)` of a row-major
4096x1024 matrix, the reduction dimension comes last) that walks the input with a stride of
1024 elements, one cache miss per element, and no loop LLVM can vectorize. After this pass
the innermost loop is the one with the smallest stride in the largest operands: the column
sum adds row after row into the 1024 outputs (a vertical, vectorizable accumulation), a 3x3
pooling window adds whole channel vectors.

What it never changes: the order in which one output element accumulates. Reduction
dimensions keep their relative order; parallel dimensions only decide *which* output
element is computed when, and each element of a linalg op's output depends only on its
own iterations. Body reads of `linalg.index` are renumbered with the dimensions.

Left alone: ops with dynamic shapes or strides, indexing expressions other than sums of
dimensions times constants, and ops whose inputs may share memory with their outputs under
a different indexing (an in-place update reads what it writes; its order matters).
"""
from __future__ import annotations

from torch_mlir import ir

from . import builders

_LINE = 64              # bytes in a cache line
_L1_BYTES = 32 * 1024   # an operand this small stays in L1 whatever the order


def _coefficients(expr: ir.AffineExpr, n_dims: int) -> list[int] | None:
    """`expr` as per-dimension coefficients if it is sum(c_d * d) + constant, else None."""
    expr = expr.maybe_downcast()
    if isinstance(expr, ir.AffineDimExpr):
        out = [0] * n_dims
        out[expr.position] = 1
        return out
    if isinstance(expr, ir.AffineConstantExpr):
        return [0] * n_dims
    if isinstance(expr, ir.AffineAddExpr):
        a, b = _coefficients(expr.lhs, n_dims), _coefficients(expr.rhs, n_dims)
        return None if a is None or b is None else [x + y for x, y in zip(a, b)]
    if isinstance(expr, ir.AffineMulExpr):
        for term, factor in ((expr.lhs, expr.rhs), (expr.rhs, expr.lhs)):
            factor = factor.maybe_downcast()
            if isinstance(factor, ir.AffineConstantExpr):
                inner = _coefficients(term, n_dims)
                return None if inner is None else [factor.value * x for x in inner]
    return None


def base_buffer(value: ir.Value) -> ir.Value:
    """The buffer `value` is a view of (through subviews, casts, reshapes)."""
    while True:
        owner = value.owner
        if isinstance(owner, ir.Block):
            return value
        owner = getattr(owner, "operation", owner)
        if owner.name in ("memref.subview", "memref.cast", "memref.reinterpret_cast",
                          "memref.expand_shape", "memref.collapse_shape", "memref.transpose",
                          "memref.view"):
            value = owner.operands[0]
        else:
            return value


def byte_strides(op: ir.Operation):
    """Per operand: (bytes it spans, [stride in bytes of each iteration dimension]), or None
    when the op is not one this module reasons about."""
    if op.name != "linalg.generic" or op.results:
        return None
    try:
        maps = [ir.AffineMapAttr(m).value for m in op.attributes["indexing_maps"]]
    except ValueError:
        return None
    n_dims = len(op.attributes["iterator_types"])
    dynamic = ir.ShapedType.get_dynamic_stride_or_offset()
    out = []
    for value, amap in zip(op.operands, maps):
        try:
            t = ir.MemRefType(value.type)
        except ValueError:
            return None
        if not t.has_static_shape:
            return None
        strides, _ = t.get_strides_and_offset()
        if any(s == dynamic for s in strides):
            return None
        width = max(1, element_bytes(t.element_type))
        per_dim = [0] * n_dims
        for expr, stride in zip(amap.results, strides):
            coeffs = _coefficients(expr, n_dims)
            if coeffs is None:
                return None
            for d, c in enumerate(coeffs):
                per_dim[d] += c * stride * width
        size = width
        for n in t.shape:
            size *= n
        out.append((size, per_dim))
    return out


_FLOAT_BYTES = {"f16": 2, "bf16": 2, "f32": 4, "f64": 8, "complex<f32>": 8,
                "complex<f64>": 16, "index": 8}


def element_bytes(element: ir.Type) -> int:
    """Bytes per element (8-bit floats and other narrow types: 1; unknown ones: 4, which
    only ever weighs a stride in the loop-order choice)."""
    try:
        return max(1, ir.IntegerType(element).width // 8)
    except ValueError:
        pass
    text = str(element)
    if text.startswith(("f8E", "f6E", "f4E")):
        return 1
    return _FLOAT_BYTES.get(text, 4)


def may_overlap(op: ir.Operation) -> bool:
    """Whether an input may share memory with an output under a different indexing."""
    n_outs = list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))[1]
    operands = list(op.operands)
    maps = list(op.attributes["indexing_maps"])
    ins, outs = range(len(operands) - n_outs), range(len(operands) - n_outs, len(operands))
    for i in ins:
        for o in outs:
            if base_buffer(operands[i]) == base_buffer(operands[o]) and \
                    (operands[i] != operands[o] or maps[i] != maps[o]):
                return True
    # Two outputs over one buffer: the later write wins, iteration by iteration.
    return any(base_buffer(operands[a]) == base_buffer(operands[b])
               for a in outs for b in outs if a < b)


def choose_order(op: ir.Operation) -> list[int] | None:
    """The dimensions outermost first, or None to keep the op as it is."""
    strides = byte_strides(op)
    if strides is None or may_overlap(op):
        return None
    iterators = [str(a) for a in op.attributes["iterator_types"]]
    n_dims = len(iterators)
    if n_dims < 2:
        return None
    # Ties below: the largest operands decide first (the output, written last, before an
    # input of its size).
    ranked = sorted(range(len(strides)), key=lambda k: (-strides[k][0], -k))

    def key(d):
        # The cache lines one step of `d` moves to, summed over the operands (a stride of a
        # line or more is a new line each step; an operand that fits in L1 counts little).
        lines = sum(min(abs(per_dim[d]), _LINE) * (1 if size > _L1_BYTES else 1 / 8)
                    for size, per_dim in strides)
        return lines, tuple(abs(strides[k][1][d]) for k in ranked)
    # Innermost first: among the parallel dimensions left and the last reduction dimension
    # left (reduction dimensions keep their relative order: each element's accumulation
    # order), the smallest strides; ties keep today's order.
    parallel = [d for d in range(n_dims) if "reduction" not in iterators[d]]
    reduction = [d for d in range(n_dims) if "reduction" in iterators[d]]
    order: list[int] = []
    while parallel or reduction:
        candidates = parallel + reduction[-1:]
        best = min(candidates, key=lambda d: (key(d), -d))
        order.insert(0, best)
        (parallel if best in parallel else reduction).remove(best)
    return None if order == list(range(n_dims)) else order


def permute(op: ir.Operation, order: list[int]) -> None:
    """Rewrite `op` in place to iterate its dimensions in `order` (outermost first)."""
    n_dims = len(order)
    position = [0] * n_dims                   # old dimension -> its new position
    for new, old in enumerate(order):
        position[old] = new
    to_new = ir.AffineMap.get_permutation(position)   # old dim d -> new dim position[d]
    maps = []
    for attr in op.attributes["indexing_maps"]:
        old_map = ir.AffineMapAttr(attr).value
        results = [expr.compose(to_new) for expr in old_map.results]
        maps.append(ir.AffineMapAttr.get(ir.AffineMap.get(n_dims, old_map.n_symbols, results)))
    iterators = list(op.attributes["iterator_types"])
    op.attributes["indexing_maps"] = ir.ArrayAttr.get(maps)
    op.attributes["iterator_types"] = ir.ArrayAttr.get([iterators[old] for old in order])

    def renumber(inner):
        if inner.operation.name == "linalg.index":
            old = ir.IntegerAttr(inner.operation.attributes["dim"]).value
            inner.operation.attributes["dim"] = ir.IntegerAttr.get(
                ir.IntegerType.get_signless(64), position[old])
        return ir.WalkResult.ADVANCE
    for inner in op.regions[0].blocks[0].operations:
        inner.operation.walk(renumber)


def order_loops(module: ir.Module) -> None:
    for op, order in builders.planned(module, ("linalg.generic",), choose_order):
        permute(op, order)
