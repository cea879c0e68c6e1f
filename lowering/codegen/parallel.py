"""Both cores for large loop nests (XLA:CPU splits big fusions across its thread pool too).

After bufferization, a large `linalg.generic` at the top level of a function (elementwise
ops, broadcasts, transposes, reductions with a parallel dimension) is outlined into
`body(ctx, begin, end)`: the same op on subviews of its operands restricted to [begin, end)
along its outermost parallel dimension. The op is replaced by a call of
`kiln_parallel_for(body, ctx, extent)` in Kiln's runtime (runtime/kiln_parallel.c), which
runs the chunks on a pool of threads; `ctx` holds the operands' base addresses, from which
the body rebuilds their (static) memref descriptors. Chunks write disjoint parts of the
outputs, and every chunk computes exactly what the serial loop computes for its indices,
so results are bit-identical to the serial code.

Reductions: chunks split a parallel dimension, so each output element still accumulates
in one chunk, in the serial order. In the outlined body LLVM cannot tell an accumulator in
memory from the input (measured: row reductions 1.5x slower); kiln-reduction-loops
(reductions.py) runs after this pass and keeps accumulators in registers, in chunks too.
Full reductions have no parallel dimension; kiln-split-reductions gives them one first.

Left alone: small ops (< MIN_ITERATIONS iterations: thread hand-off costs ~10 us), dynamic
shapes or strides, ops whose body reads `linalg.index` of the split dimension (chunks
would renumber it) or an outside value other than a constant, ops nested in loops. Operands that are one buffer (in-place updates) are rebuilt from one pointer, so
LLVM still vectorizes them. Measured on the shared 2-core VM: gelu over 4M elements
3.5 -> 2.1 ms; memory-bound ops gain little (softmax 11.4 -> 8.6 ms).
"""
from __future__ import annotations

from torch_mlir import ir
from torch_mlir.dialects import arith, builtin, func, llvm, memref

from . import builders

MIN_ITERATIONS = 1 << 18
_PARALLEL_FOR = "kiln_parallel_for"   # runtime/kiln_parallel.c
_ELEM_BYTES = {"f16": 2, "bf16": 2, "f32": 4, "f64": 8, "i1": 1, "i8": 1, "i16": 2, "i32": 4,
               "i64": 8}


def _dims(op: ir.Operation) -> list[list[int]] | None:
    """Each operand's dimension per result of its indexing map; -1 for a constant index (a
    broadcast size-1 dimension, `(d0, d1) -> (d0, 0)`); None for any other expression."""
    out = []
    for m in op.attributes["indexing_maps"]:
        dims = []
        for e in ir.AffineMapAttr(m).value.results:
            e = e.maybe_downcast()
            if isinstance(e, ir.AffineDimExpr):
                dims.append(e.position)
            elif isinstance(e, ir.AffineConstantExpr):
                dims.append(-1)
            else:
                return None
        out.append(dims)
    return out


def _plan(op: ir.Operation):
    if op.name != "linalg.generic" or op.results or "indexing_maps" not in op.attributes:
        return None
    parent = op.parent
    if parent is None or parent.name != "func.func":
        return None
    maps = _dims(op)
    if maps is None or len(maps) != len(op.operands):
        return None
    types = []
    dynamic = ir.ShapedType.get_dynamic_stride_or_offset()
    for v in op.operands:
        try:
            t = ir.MemRefType(v.type)
        except ValueError:
            return None
        strides, _ = t.get_strides_and_offset()
        if not t.has_static_shape or any(s == dynamic for s in strides) \
                or str(t.element_type) not in _ELEM_BYTES:
            return None
        types.append((t, strides))
    extent = {}
    for (t, _), dims in zip(types, maps):
        extent.update((d, n) for d, n in zip(dims, t.shape) if d >= 0)
    iterators = [str(a) for a in op.attributes["iterator_types"]]
    if len(extent) != len(iterators):
        return None
    # Split the outermost parallel loop (kiln-order-loops chose the order): chunks write
    # disjoint outputs and each output element accumulates exactly as in the serial loop
    # (a column sum, reduction outermost, splits its columns). With no parallel dimension
    # (a full reduction that kiln-split-reductions left alone) the op stays serial.
    split = next((d for d in range(len(iterators))
                  if extent[d] > 1 and "reduction" not in iterators[d]), None)
    if split is None:
        return None
    total = 1
    for n in extent.values():
        total *= n
    if total < MIN_ITERATIONS:
        return None
    uses_index = []

    def visit(inner):   # chunks renumber the split dimension only
        if inner.operation.name == "linalg.index" and \
                ir.IntegerAttr(inner.operation.attributes["dim"]).value == split:
            uses_index.append(inner)
        return ir.WalkResult.ADVANCE
    for inner in op.regions[0].blocks[0].operations:
        inner.operation.walk(visit)
    if uses_index:
        return None
    if any(dims.count(split) > 1 for dims in maps):
        return None
    captured = _captured_constants(op)
    if captured is None:
        return None
    operands = list(op.operands)
    slots = [next(j for j in range(i + 1) if operands[j] == operands[i])
             for i in range(len(operands))]
    return {"types": types, "maps": maps, "split": split, "extent": extent[split],
            "constants": captured, "slots": slots}


def _inside(owner, op: ir.Operation) -> bool:
    while owner is not None:
        if owner == op:
            return True
        owner = owner.parent
    return False


def _captured_constants(op: ir.Operation):
    """The arith.constant ops from outside that the body uses (to be cloned into the
    outlined function), or None if it uses any other outside value."""
    found, ok = [], [True]
    body = op.regions[0].blocks[0]

    def visit(inner):
        for v in inner.operation.operands:
            owner = v.owner
            if isinstance(owner, ir.Block):
                if owner != body and not _inside(owner.owner, op):
                    ok[0] = False
                continue
            owner = getattr(owner, "operation", owner)
            if _inside(owner, op):
                continue
            if owner.name != "arith.constant":
                ok[0] = False
            elif all(owner != f for f in found):
                found.append(owner)
        return ir.WalkResult.ADVANCE
    for inner in body.operations:
        inner.operation.walk(visit)
    return found if ok[0] else None


def _descriptor_type(rank: int) -> ir.Type:
    """The LLVM struct of a memref descriptor: (allocated, aligned, offset, sizes, strides)."""
    ptr, i64 = builders.pointer(), builders.i64()
    if rank == 0:
        return llvm.StructType.get_literal([ptr, ptr, i64])
    array = llvm.ArrayType.get(i64, rank)
    return llvm.StructType.get_literal([ptr, ptr, i64, array, array])


def _strided(t: ir.MemRefType, strides: list[int]) -> ir.MemRefType:
    """`t` with its strides spelled out (offset 0)."""
    return ir.MemRefType.get(list(t.shape), t.element_type, ir.StridedLayoutAttr.get(0, strides))


def _subview_type(t: ir.MemRefType, strides: list[int], pos: int) -> ir.MemRefType:
    """`t` restricted to a dynamic range along dimension `pos`, at a dynamic offset."""
    dynamic = ir.ShapedType.get_dynamic_size()
    shape = [dynamic if k == pos else n for k, n in enumerate(t.shape)]
    layout = ir.StridedLayoutAttr.get(ir.ShapedType.get_dynamic_stride_or_offset(), strides)
    return ir.MemRefType.get(shape, t.element_type, layout)


def _build_body(module: ir.Module, symbols: ir.SymbolTable, name: str, op: ir.Operation,
                plan) -> None:
    """The outlined function `name(ctx, begin, end)`: rebuild each operand from its address in
    ctx, take its [begin, end) slice along the split dimension, and run a clone of `op` (with
    the outside constants its body uses) on the slices."""
    split = plan["split"]
    i64 = builders.i64()
    fn = builders.define_private(module, symbols, name, [builders.pointer(), i64, i64])
    entry = fn.entry_block
    ctx, begin, end = entry.arguments
    # llvm.mlir.constant i64s for the descriptors' sizes and strides, one per value
    const = builders.Constants(entry, builders.llvm_constant, newest_first=True)
    with ir.InsertionPoint(entry):
        ret = func.ReturnOp([])
    with ir.InsertionPoint(ret):
        zero = builders.llvm_constant(0, i64)
        b = arith.index_cast(builders.index(), begin)
        e = arith.index_cast(builders.index(), end)
        length = arith.subi(e, b)
        addresses, views = {}, []
        for i, ((t, strides), dims) in enumerate(zip(plan["types"], plan["maps"])):
            # One load per distinct operand: an op updating a buffer in place must see one
            # pointer, or LLVM's runtime overlap check sends the loop to its scalar version.
            src = plan["slots"][i]
            if src == i:
                slot = llvm.GEPOp(builders.pointer(), ctx, [], [i], i64,
                                  llvm.GEPNoWrapFlags.none).result
                addresses[i] = llvm.LoadOp(builders.pointer(), slot).result
            struct = _descriptor_type(t.rank)
            d = llvm.UndefOp(struct).result
            d = llvm.InsertValueOp(d, addresses[src], [0]).result
            d = llvm.InsertValueOp(d, addresses[src], [1]).result
            d = llvm.InsertValueOp(d, zero, [2]).result
            for k, (n, s) in enumerate(zip(t.shape, strides)):
                d = llvm.InsertValueOp(d, const(n, i64), [3, k]).result
                d = llvm.InsertValueOp(d, const(s, i64), [4, k]).result
            full = _strided(t, strides)
            m = builtin.UnrealizedConversionCastOp([full], [d]).result
            if split in dims:
                pos = dims.index(split)
                offsets, sizes = [0] * t.rank, list(t.shape)
                offsets[pos], sizes[pos] = b, length
                views.append(memref.subview(m, offsets, sizes, [1] * t.rank,
                                            result_type=_subview_type(t, strides, pos)))
            else:
                views.append(memref.CastOp(full, m).result)
        copies = [(c.results[0], c.clone().results[0]) for c in plan["constants"]]
        clone = op.clone()
    for i, v in enumerate(views):
        clone.operands[i] = v

    def remap(inner):
        for i, v in enumerate(inner.operation.operands):
            for old, new in copies:
                if v == old:
                    inner.operation.operands[i] = new
        return ir.WalkResult.ADVANCE
    for inner in clone.regions[0].blocks[0].operations:
        inner.operation.walk(remap)


def parallelize(module: ir.Module) -> None:
    todo = builders.planned(module, ("linalg.generic",), _plan)
    if not todo:
        return
    symbols = ir.SymbolTable(module.operation)
    with ir.Location.unknown():
        builders.declare_external(module, symbols, _PARALLEL_FOR,
                                  [_body_type(), builders.pointer(), builders.i64()])
    for n, (op, plan) in enumerate(todo):
        name = builders.unique_symbol(symbols, f"kiln_parallel_body_{n}")
        with op.location:
            _build_body(module, symbols, name, op, plan)
            _build_call(op, plan, name)
        op.erase()


def _body_type() -> ir.FunctionType:
    """body(ctx, begin, end), as `kiln_parallel_for` calls it."""
    return ir.FunctionType.get([builders.pointer(), builders.i64(), builders.i64()], [])


def _build_call(op: ir.Operation, plan, name: str) -> None:
    """Just before `op`: ctx = the operands' element-0 addresses;
    kiln_parallel_for(@name, ctx, extent)."""
    k = len(op.operands)
    i64 = builders.i64()
    with ir.InsertionPoint(op):
        alloca = memref.AllocaOp(ir.MemRefType.get([k], i64), [], [])
        const = builders.Constants(op.block, after=alloca.operation)
        for i in range(k):   # the slots' indices first, then the element sizes
            const(i)
        for size in sorted({_ELEM_BYTES[str(t.element_type)] for t, _ in plan["types"]}):
            const(size)
        context = alloca.result
        for i, ((t, _), v) in enumerate(zip(plan["types"], op.operands)):
            address = builders.element_address(v, _ELEM_BYTES[str(t.element_type)], const)
            memref.StoreOp(arith.index_cast(i64, address), context, [const(i)])
        ctx = builders.as_pointer(memref.ExtractAlignedPointerAsIndexOp(context).result)
        extent = arith.ConstantOp(i64, ir.IntegerAttr.get(i64, plan["extent"])).result
        body = func.ConstantOp(_body_type(), ir.FlatSymbolRefAttr.get(name)).result
        func.CallOp([], ir.FlatSymbolRefAttr.get(_PARALLEL_FOR), [body, ctx, extent])
