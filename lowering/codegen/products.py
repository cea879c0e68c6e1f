"""Matrix products in the precisions the bundled BLAS lacks, computed through the ones it has
(tensor level, before `protect_contractions`).

OpenBLAS as numpy ships it has sgemm/dgemm but no bf16, f16 or integer gemm. XLA:CPU computes
these products with f32 (floats) or int32 (integers) accumulation; so does this rewrite, with
an O(n^2) copy of each operand into the accumulation precision in front of an O(n^3) library
product:

- f16/bf16 (or integer) operands, f32/f64 result: each operand converted to the result type
  by the very cast the product's body applies (exact for f16/bf16), then a pure f32/f64
  contraction.
- integer operands and an integer result (int8 x int8 -> int32 and the like): every product
  and partial sum is an integer of magnitude at most K * max|a| * max|b|. When that bound is at
  most 2^24 every partial sum is an exact f32, whatever order or fused multiply-adds the
  library uses, so sgemm returns the exact sum; below 2^53 dgemm does. The exact sum is
  converted back (through i64 where it may not fit the result) and wraps to the result width,
  which is what accumulating in the result type gives: bit-exact. Where the bound passes 2^24
  only through a long contraction (int8 with K > 1024), the K range is split into chunks that
  each stay below it: one sgemm per chunk, the exact partial sums added as integers (twice
  dgemm's speed). Otherwise dgemm; beyond 2^53 the product stays a loop nest.

An integer operand that is itself an elementwise sign/zero extension of a narrower tensor (an
`astype(int32)` in front of the product, or an unsigned operand widened by
kiln-fix-semantics) is read from the narrower tensor, whose range makes the bound tighter.

Where the CPU has AMX (runtime/libraries.py `amx_products`), the products XLA:CPU hands to
oneDNN's AMX kernels are not widened but go to Kiln's runtime (runtime/kiln_gemm_amx.c) as
they are: bf16 x bf16 -> f32 (also an f32 product of two tensors widened from bf16, which is
how a bf16 dot with a bf16 result arrives) and 8-bit x 8-bit -> int32 (signed or unsigned,
also read through a narrowing source), when both M and N exceed 1 (matrix-vector products
keep the routes below). They are rewritten into one contraction over the narrow operands, `out + cast(a) *
cast(b)`, that `kernel_product` recognises at both levels (blas.py protects and calls it);
integer results are bit-exact, bf16 ones the same products summed in another order.

Left alone: products under the library's size threshold (they stay loops, as the f32 ones
do; `blas.protect_contractions` runs this only where there is a library); products that
read each element of their larger operand fewer than MIN_REUSE times, in the order it is laid
out (a matrix-vector product: copying the matrix would cost more than the loops); dynamic
shapes; bodies other than `out + cast(a) * cast(b)`.
"""
from __future__ import annotations

from dataclasses import dataclass

from torch_mlir import ir
from torch_mlir.dialects import arith, linalg, tensor

from . import builders
from ...runtime.libraries import GEMM_BF16_F32, GEMM_I8_I32, amx_products

# Multiply-adds per element of the larger operand below which a widened copy costs more than
# the loop nest, when that loop nest reads the operand in its own order (measured: a 4096^2
# bf16 matrix-vector product, 17-30 ms in loops, 30-55 ms converted; int8, 1 ms against
# 100+). Read across its rows, as a vector-matrix product's loops do, the loops are far
# slower: 1 x 2048 x 2048 bf16 30 ms in loops, 1 ms converted and through gemv.
MIN_REUSE = 4

_FLOAT_CASTS = ("arith.extf", "arith.sitofp", "arith.uitofp")
_INT_CASTS = ("arith.extsi", "arith.extui")
_EXACT_F32, _EXACT_F64 = 1 << 24, 1 << 53
# K chunks for sgemm: each at least this deep (shallower gemms lose their speed; uint8's
# 2^24 / 255^2 = 258 still qualifies), and at most this many (else one dgemm).
MIN_CHUNK, MAX_CHUNKS = 256, 16


@dataclass
class _Factor:
    """One operand as the product reads it: `value` (a tensor), converted with `cast`
    (None: used as it is), and for integers the largest magnitude it can hold."""
    value: ir.Value
    cast: str | None
    bound: int = 0


@dataclass(frozen=True)
class KernelProduct:
    """A product the runtime's bf16/8-bit kernel computes: its C symbol, and whether each
    8-bit operand (the op's first, second) holds unsigned values."""
    symbol: str
    a_unsigned: bool = False
    b_unsigned: bool = False


def kernel_product(op: ir.Operation) -> KernelProduct | None:
    """The kernel for a contraction (tensors or memrefs) whose body is `out + cast(a) *
    cast(b)` with bf16 operands and an f32 result, or 8-bit ones and an i32 result; else
    None. Only the types and the body: the caller checks the shapes."""
    if len(op.operands) != 3 or len(op.regions) != 1 or not op.regions[0].blocks:
        return None
    found = _body_casts(op)
    if found is None:
        return None
    (cast_a, cast_b), kind = found
    a, b, c = (str(_element(v)) for v in op.operands)
    if kind == "float":
        if (a, b, c) == ("bf16", "bf16", "f32") and cast_a == cast_b == "arith.extf":
            return KernelProduct(GEMM_BF16_F32)
        return None
    if (a, b, c) == ("i8", "i8", "i32") and cast_a in _INT_CASTS and cast_b in _INT_CASTS:
        return KernelProduct(GEMM_I8_I32, cast_a == "arith.extui", cast_b == "arith.extui")
    return None


def _matrix_sides(op: ir.Operation, extent: dict[int, int]) -> bool:
    """Whether the product is a (batched) matrix product with one M, one N and one K dim,
    M and N both larger than 1: the kernel's shape."""
    dims = linalg.infer_contraction_dimensions(op)
    if dims is None or len(dims.k) != 1 or len(dims.m) != 1 or len(dims.n) != 1:
        return False
    return extent[dims.m[0]] > 1 and extent[dims.n[0]] > 1


def _defining_op(value: ir.Value):
    owner = value.owner
    owner = getattr(owner, "operation", owner)
    return owner if isinstance(owner, ir.Operation) else None


def _body_casts(op: ir.Operation):
    """For a body `out + cast(a) * cast(b)`: ([cast of a, cast of b], "float" | "int"), with
    None for an operand used as it is; None for any other body."""
    block = op.regions[0].blocks[0]
    ops = [o.operation for o in block.operations]
    args = list(block.arguments)
    if len(ops) < 3 or len(args) != 3:
        return None
    *casts, mul, add, yld = ops
    kind = {"arith.mulf": "float", "arith.muli": "int"}.get(mul.name)
    if kind is None or add.name != ("arith.addf" if kind == "float" else "arith.addi") \
            or yld.name != "linalg.yield" or yld.operands[0] != add.result:
        return None
    s0, s1 = add.operands[0], add.operands[1]
    if not ((s0 == args[2] and s1 == mul.result) or (s1 == args[2] and s0 == mul.result)):
        return None
    allowed = _FLOAT_CASTS if kind == "float" else _INT_CASTS
    source = []   # (block argument index, cast name or None) for each factor
    for factor in (mul.operands[0], mul.operands[1]):
        cast = next((c for c in casts if len(c.results) == 1 and c.results[0] == factor), None)
        read = cast.operands[0] if cast is not None else factor
        index = next((i for i in (0, 1) if args[i] == read), None)
        if index is None or (cast is not None and cast.name not in allowed):
            return None
        source.append((index, cast.name if cast is not None else None))
    used_casts = sum(c is not None for _, c in source)
    if sorted(i for i, _ in source) != [0, 1] or len(casts) != used_casts:
        return None
    return [dict(source)[0], dict(source)[1]], kind


def _int_width(t: ir.Type) -> int | None:
    return ir.IntegerType(t).width if isinstance(t, ir.IntegerType) else None


def _element(value: ir.Value) -> ir.Type:
    return ir.ShapedType(value.type).element_type


def _narrower_source(value: ir.Value, casts: tuple[str, ...] = _INT_CASTS):
    """(source tensor, the cast) if `value` is an elementwise extension (one of `casts`:
    integer ones unless told) of a narrower tensor of the same shape, else None."""
    producer = _defining_op(value)
    if producer is None or producer.name != "linalg.generic" or len(producer.operands) != 2 \
            or len(producer.results) != 1:
        return None
    try:
        maps = [ir.AffineMapAttr(m).value for m in producer.attributes["indexing_maps"]]
    except (KeyError, ValueError):
        return None
    if not all(m.is_permutation and list(m.results) == list(maps[1].results) for m in maps) \
            or "reduction" in str(producer.attributes["iterator_types"]):
        return None
    body = [o.operation for o in producer.regions[0].blocks[0].operations]
    arg = producer.regions[0].blocks[0].arguments[0]
    if len(body) != 2 or body[0].name not in casts or body[0].operands[0] != arg \
            or body[1].operands[0] != body[0].result:
        return None
    return producer.operands[0], body[0].name


def _int_factor(value: ir.Value, cast: str | None) -> _Factor:
    """The integer operand `value` as the product reads it, through a narrowing source where
    the extensions compose into one (a zero extension of a sign extension does not)."""
    inner = _narrower_source(value)
    if inner is not None and not (cast == "arith.extui" and inner[1] == "arith.extsi"):
        value, cast = inner
    width = _int_width(_element(value))
    unsigned = cast == "arith.extui"
    return _Factor(value, cast, (1 << width) - 1 if unsigned else 1 << (width - 1))


def _float_type(width: int) -> ir.Type:
    return ir.F32Type.get() if width == 32 else ir.F64Type.get()


def _elementwise(inputs: list[ir.Value], result: ir.RankedTensorType, body) -> ir.Value:
    """An all-parallel linalg.generic over same-shaped `inputs` into a new `result` tensor,
    whose body yields `body(*input elements)`."""
    rank = len(result.shape)
    identity = ir.AffineMapAttr.get(ir.AffineMap.get_identity(rank))
    empty = tensor.EmptyOp(list(result.shape), result.element_type).result
    op = ir.Operation.create(
        "linalg.generic", results=[result], operands=[*inputs, empty],
        attributes={"indexing_maps": ir.ArrayAttr.get([identity] * (len(inputs) + 1)),
                    "iterator_types": ir.ArrayAttr.get([builders.iterator_type("parallel")] * rank),
                    "operandSegmentSizes": ir.DenseI32ArrayAttr.get([len(inputs), 1])},
        regions=1)
    block = op.regions[0].blocks.append(*[_element(v) for v in inputs], result.element_type)
    with ir.InsertionPoint(block):
        linalg.YieldOp([body(*block.arguments[:len(inputs)])])
    return op.result


def _convert(factor: _Factor, wide: ir.Type) -> ir.Value:
    """`factor` as a tensor of `wide` floats (as it is if it already is one)."""
    source = _element(factor.value)
    if source == wide:
        return factor.value
    shape = ir.RankedTensorType(factor.value.type).shape
    if isinstance(source, ir.IntegerType):
        make = arith.uitofp if factor.cast in ("arith.extui", "arith.uitofp") else arith.sitofp
    else:
        make = arith.extf
    return _elementwise([factor.value], ir.RankedTensorType.get(shape, wide),
                        lambda x: make(wide, x))


def _product_generic(op: ir.Operation, a: ir.Value, b: ir.Value, init: ir.Value):
    """An empty linalg.generic accumulating a * b into `init` over `op`'s indexing maps (the
    output's dimensions parallel, the rest reductions), and its block's (x, y, acc)."""
    maps = _maps(op)
    out_dims = {ir.AffineDimExpr(e).position for e in maps[2].results}
    iterators = [builders.iterator_type("parallel" if d in out_dims else "reduction")
                 for d in range(maps[0].n_dims)]
    new = ir.Operation.create(
        "linalg.generic", results=[init.type], operands=[a, b, init],
        attributes={"indexing_maps": ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in maps]),
                    "iterator_types": ir.ArrayAttr.get(iterators),
                    "operandSegmentSizes": ir.DenseI32ArrayAttr.get([2, 1])},
        regions=1)
    block = new.regions[0].blocks.append(_element(a), _element(b), _element(init))
    return new, block


def _contraction(op: ir.Operation, a: ir.Value, b: ir.Value, init: ir.Value) -> ir.Value:
    """`init + a * b` over `op`'s indexing maps, as a linalg.generic in init's element type."""
    new, block = _product_generic(op, a, b, init)
    x, y, acc = block.arguments
    with ir.InsertionPoint(block):
        linalg.YieldOp([arith.addf(acc, arith.mulf(x, y))])
    return new.result


def _kernel_contraction(op: ir.Operation, factors: list[_Factor], init: ir.Value,
                        kind: str) -> ir.Operation:
    """`init + cast(a) * cast(b)` over `op`'s maps, reading the factors' (narrow) tensors:
    the form `kernel_product` recognises."""
    new, block = _product_generic(op, factors[0].value, factors[1].value, init)
    et = _element(init)
    x, y, acc = block.arguments
    with ir.InsertionPoint(block):
        if kind == "float":
            x, y = arith.extf(et, x), arith.extf(et, y)
            linalg.YieldOp([arith.addf(acc, arith.mulf(x, y))])
        else:
            widen = [arith.extui if f.cast == "arith.extui" else arith.extsi for f in factors]
            x, y = widen[0](et, x), widen[1](et, y)
            linalg.YieldOp([arith.addi(acc, arith.muli(x, y))])
    return new


def goes_to_kernel(op: ir.Operation) -> bool:
    """Whether a tensor-level product in kernel form (see `kernel_product`) is one that
    `blas.protect_contractions` must keep whole for the runtime's kernel."""
    extent = _extents(op)
    return extent is not None and kernel_product(op) is not None \
        and _matrix_sides(op, extent) and amx_products()


def _is_zero_fill(value: ir.Value) -> bool:
    fill = _defining_op(value)
    if fill is None or fill.name != "linalg.fill":
        return False
    cst = _defining_op(fill.operands[0])
    if cst is None or cst.name != "arith.constant":
        return False
    try:
        return ir.IntegerAttr(cst.attributes["value"]).value == 0
    except ValueError:
        return False


def _to_int(exact: list[ir.Value], init: ir.Value) -> ir.Value:
    """The sum of the exact integer sums `exact` (floats) in init's integer type, wrapped to
    its width (wrapping each term first gives the same bits), plus init unless that is a zero
    fill."""
    result = ir.RankedTensorType(init.type)
    target = result.element_type
    width = _int_width(target)
    # an f32 sum is below 2^24, an f64 one below 2^53: i32 / i64 hold it before wrapping
    via = ir.IntegerType.get_signless(32 if str(_element(exact[0])) == "f32" else 64)
    inputs = exact + ([] if _is_zero_fill(init) else [init])

    def body(*values):
        total = values[len(exact):]   # init, if any
        for p in values[:len(exact)]:
            if width >= via.width:
                term = arith.fptosi(target, p)
            else:
                term = arith.trunci(target, arith.fptosi(via, p))
            total = (arith.addi(total[0], term) if total else term,)
        return total[0]
    return _elementwise(inputs, result, body)


def _depth_chunks(depth: int, per_step: int) -> int:
    """How many K chunks keep every partial sum of `per_step`-bounded products within f32's
    exact integers (1: no split needed; 0: no split works)."""
    longest = _EXACT_F32 // per_step
    chunks = -(-depth // longest) if longest else 0
    if chunks > 1 and (depth // chunks < MIN_CHUNK or chunks > MAX_CHUNKS):
        return 0
    return chunks


def _slice_depth(value: ir.Value, axis: int | None, start: int, size: int) -> ir.Value:
    """`value` restricted to [start, start + size) along `axis` (as it is if None)."""
    if axis is None:
        return value
    t = ir.RankedTensorType(value.type)
    shape = list(t.shape)
    offsets, shape[axis] = [0] * len(shape), size
    offsets[axis] = start
    return tensor.extract_slice(ir.RankedTensorType.get(shape, t.element_type), value, [], [], [],
                                offsets, shape, [1] * len(shape))


def _maps(op: ir.Operation) -> list[ir.AffineMap]:
    return [ir.AffineMapAttr(m).value for m in linalg.get_indexing_maps(op)]


def _read_in_order(op: ir.Operation, operand: int) -> bool:
    """Whether the loop nest the op becomes walks `operand` along its contiguous last dim in
    the innermost loop (loops nest in the order of the iteration dims)."""
    m = _maps(op)[operand]
    results = list(m.results)
    try:
        return bool(results) and ir.AffineDimExpr(results[-1]).position == m.n_dims - 1
    except ValueError:
        return False


def _extents(op: ir.Operation) -> dict[int, int] | None:
    extent = {}
    for value, m in zip(op.operands, _maps(op)):
        shape = ir.ShapedType(value.type)
        if not shape.has_static_shape:
            return None
        try:
            extent.update(zip([ir.AffineDimExpr(e).position for e in m.results], shape.shape))
        except ValueError:
            return None
    return extent


def _product(values) -> int:
    n = 1
    for v in values:
        n *= v
    return n


def _chunked_products(op: ir.Operation, x: ir.Value, y: ir.Value, wide: ir.Type,
                      chunks: int) -> list[ir.Value]:
    """`x * y` over op's maps into zero-filled `wide` tensors, one per chunk of the (single)
    reduction dim when there is more than one chunk."""
    maps = _maps(op)
    shape = list(ir.RankedTensorType(op.operands[2].type).shape)
    zero = arith.ConstantOp(wide, ir.FloatAttr.get(wide, 0.0)).result
    axes, depth, step = [None, None], 1, 1
    if chunks > 1:
        out_dims = {ir.AffineDimExpr(e).position for e in maps[2].results}
        k = next(d for d in range(maps[0].n_dims) if d not in out_dims)
        axes = [[ir.AffineDimExpr(e).position for e in m.results].index(k) for m in maps[:2]]
        depth = ir.RankedTensorType(x.type).shape[axes[0]]
        step = -(-depth // chunks)
    products = []
    for start in range(0, depth, step):
        size = min(step, depth - start)
        fill = linalg.fill(zero, outs=[tensor.EmptyOp(shape, wide).result])
        products.append(_contraction(op, _slice_depth(x, axes[0], start, size),
                                     _slice_depth(y, axes[1], start, size), fill))
    return products


def _widen(op: ir.Operation, min_macs: int) -> bool:
    """Rewrite one contraction as described in the module docstring; False if it stays."""
    found = _body_casts(op)
    extent = _extents(op)
    if found is None or extent is None:
        return False
    (cast_a, cast_b), kind = found
    a, b, init = op.operands
    macs = _product(extent.values())
    sizes = [_product(ir.ShapedType(v.type).shape) for v in (a, b)]
    larger = sizes.index(max(sizes))
    if macs < min_macs or (macs < MIN_REUSE * sizes[larger] and _read_in_order(op, larger)):
        return False
    result = _element(init)
    if kind == "float":
        if cast_a is None and cast_b is None and str(result) == "f32":
            # an f32 product of bf16 tensors each widened exactly in front of it (a bf16 dot
            # with a bf16 result, as the front end accumulates it): the kernel reads them
            narrow = [_narrower_source(v, ("arith.extf",)) for v in (a, b)]
            if all(n is not None and str(_element(n[0])) == "bf16" for n in narrow):
                return _to_kernel(op, [_Factor(n[0], n[1]) for n in narrow], kind, extent)
        if str(result) not in ("f32", "f64") or (cast_a is None and cast_b is None):
            return False   # a pure f32/f64 product: the library takes it as it is
        factors = [_Factor(a, cast_a), _Factor(b, cast_b)]
        wide = result
    else:
        if _int_width(result) in (None, 1) or _int_width(_element(a)) is None \
                or _int_width(_element(b)) is None:
            return False
        factors = [_int_factor(a, cast_a), _int_factor(b, cast_b)]
        out_dims = {ir.AffineDimExpr(e).position for e in _maps(op)[2].results}
        reduced = [d for d in extent if d not in out_dims]
        depth = _product(extent[d] for d in reduced)
        per_step = factors[0].bound * factors[1].bound
        chunks = _depth_chunks(depth, per_step) if len(reduced) == 1 else int(
            depth * per_step <= _EXACT_F32)
        if not chunks and depth * per_step > _EXACT_F64:
            return False
        wide = _float_type(32 if chunks else 64)
    if _to_kernel(op, factors, kind, extent):
        return True
    with ir.InsertionPoint(op), op.location:
        x, y = (_convert(f, wide) for f in factors)
        if kind == "float":
            out = _contraction(op, x, y, init)
            fill = _defining_op(init)
            if fill is not None and fill.name == "linalg.fill" and len(list(init.uses)) == 2:
                # right before the product, where the call can take it as beta = 0
                fill.move_before(_defining_op(out))
        else:
            out = _to_int(_chunked_products(op, x, y, wide, max(chunks, 1)), init)
    op.results[0].replace_all_uses_with(out)
    op.erase()
    return True


def _to_kernel(op: ir.Operation, factors: list[_Factor], kind: str,
               extent: dict[int, int]) -> bool:
    """Rewrite the product into kernel form over its narrow operands (True), if the
    runtime's kernel takes it (see the module docstring)."""
    widths = [_int_width(_element(f.value)) for f in factors]
    if kind == "int" and (widths != [8, 8] or any(f.cast is None for f in factors)
                          or str(_element(op.operands[2])) != "i32"):
        return False
    if kind == "float" and not (all(str(_element(f.value)) == "bf16" and f.cast == "arith.extf"
                                    for f in factors)
                                and str(_element(op.operands[2])) == "f32"):
        return False
    if not _matrix_sides(op, extent) or not amx_products():
        return False
    with ir.InsertionPoint(op), op.location:
        new = _kernel_contraction(op, factors, op.operands[2], kind)
    fill = _defining_op(op.operands[2])
    if fill is not None and fill.name == "linalg.fill" and len(list(op.operands[2].uses)) == 2:
        fill.move_before(new)   # right before the product: the call takes it as C = A B
    op.results[0].replace_all_uses_with(new.results[0])
    op.erase()
    return True


def widen_products(module: ir.Module, min_macs: int) -> None:
    """bf16/f16/integer products of at least `min_macs` multiply-adds -> f32/f64 contractions
    the BLAS path takes (see the module docstring)."""
    todo = []

    def visit(op):
        op = op.operation
        if op.name.startswith("linalg.") and len(op.operands) == 3 and len(op.results) == 1 \
                and isinstance(op.results[0].type, ir.RankedTensorType) \
                and linalg.isa_contraction_op(op):
            todo.append(op)
        return ir.WalkResult.ADVANCE
    module.operation.walk(visit)
    for op in todo:
        _widen(op, min_macs)
