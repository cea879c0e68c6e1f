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

Data movement (issue #13): bodies that read other memrefs (a gather's table and indices, a
concatenation's pieces) pass those memrefs' addresses in ctx too, rebuilt in the body, and
such loads are marked `kiln.read_only` (no write of the op aliases them: their roots are
checked), which lets kiln-hoist-invariant-loads (invariant_loads.py) take a gather's index
load out of the row loop. Other outside scalars (a pad value loaded from a buffer) travel
as their bits in 64-bit slots. `linalg.index` of the split dimension is shifted by the
chunk's `begin`. Large copies and fills (pads, slices, dynamic_update_slice) are rewritten
into identity generics first (copies.py) and split like elementwise ops. Window ops
(reduce_window: an input indexed by `d1 + d4`) split along a dimension outside every
compound index.

Left alone: small ops (< MIN_ITERATIONS iterations: thread hand-off costs ~10 us), dynamic
shapes or strides, bodies that write memory, call functions, or read a buffer the op
writes, outside values of other types, ops nested in anything but loops and branches
(whose ctx then sits in the function's entry block). Operands that are one buffer
(in-place updates) are rebuilt from one pointer, so LLVM still vectorizes them. Measured on
the shared 2-core VM: gelu over 4M elements 3.5 -> 2.1 ms; memory-bound ops gain little
(softmax 11.4 -> 8.6 ms).
"""
from __future__ import annotations

from torch_mlir import ir
from torch_mlir.dialects import arith, builtin, func, llvm, memref

from . import builders, invariant_loads
from .copies import copies_as_generics
from .loop_order import base_buffer
from .windows import unroll_windows

MIN_ITERATIONS = 1 << 18
_PARALLEL_FOR = "kiln_parallel_for"   # runtime/kiln_parallel.c
_PASSTHROUGH = "llvm.passthrough"     # becomes llvm.func's `passthrough`: LLVM function attributes
_ELEM_BYTES = {"f16": 2, "bf16": 2, "f32": 4, "f64": 8, "i1": 1, "i8": 1, "i16": 2, "i32": 4,
               "i64": 8}


def _expr_dims(e) -> set[int]:
    """The loop dimensions an affine expression reads."""
    e = e.maybe_downcast() if hasattr(e, "maybe_downcast") else e
    if isinstance(e, ir.AffineDimExpr):
        return {e.position}
    if isinstance(e, ir.AffineBinaryExpr):
        return _expr_dims(e.lhs) | _expr_dims(e.rhs)
    return set()


def _dims(op: ir.Operation) -> list[list] | None:
    """Each operand's dimension per result of its indexing map: the loop dimension for a plain
    `dK`, -1 for a constant index (a broadcast size-1 dimension, `(d0, d1) -> (d0, 0)`), the
    frozenset of dimensions it reads for any other expression (a window's `d1 + d4`, a
    stride's `d1 * 2`)."""
    out = []
    for m in op.attributes["indexing_maps"]:
        dims = []
        for e in ir.AffineMapAttr(m).value.results:
            e = e.maybe_downcast()
            if isinstance(e, ir.AffineDimExpr):
                dims.append(e.position)
            elif isinstance(e, ir.AffineConstantExpr):
                dims.append(-1)
            elif isinstance(e, ir.AffineBinaryExpr):
                dims.append(frozenset(_expr_dims(e)))
            else:
                return None
        out.append(dims)
    return out


def _static_memref(t: ir.Type):
    """(type, strides) of a memref with static shape and strides of a supported element type,
    else None."""
    try:
        t = ir.MemRefType(t)
    except ValueError:
        return None
    strides, _ = t.get_strides_and_offset()
    dynamic = ir.ShapedType.get_dynamic_stride_or_offset()
    if not t.has_static_shape or any(s == dynamic for s in strides) \
            or str(t.element_type) not in _ELEM_BYTES:
        return None
    return t, strides


def _plan(op: ir.Operation):
    if op.name != "linalg.generic" or op.results or "indexing_maps" not in op.attributes:
        return None
    if _enclosing_function(op) is None:
        return None
    maps = _dims(op)
    if maps is None or len(maps) != len(op.operands):
        return None
    types = []
    for v in op.operands:
        typed = _static_memref(v.type)
        if typed is None:
            return None
        types.append(typed)
    extent = {}
    for (t, _), dims in zip(types, maps):
        extent.update((d, n) for d, n in zip(dims, t.shape) if isinstance(d, int) and d >= 0)
    iterators = [str(a) for a in op.attributes["iterator_types"]]
    if len(extent) != len(iterators):
        return None
    outputs = len(op.opview.outputs)
    windowed = set().union(*(d for dims in maps for d in dims if isinstance(d, frozenset)))
    # Split the outermost parallel loop (kiln-order-loops chose the order): chunks write
    # disjoint outputs and each output element accumulates exactly as in the serial loop
    # (a column sum, reduction outermost, splits its columns). With no parallel dimension
    # (a full reduction that kiln-split-reductions left alone) the op stays serial. A
    # dimension inside a window expression (`d1 + d4`) cannot be sliced by a subview, and
    # every output must be indexed by the split dimension itself, or chunks would race.
    split = next((d for d in range(len(iterators))
                  if extent[d] > 1 and "reduction" not in iterators[d] and d not in windowed
                  and all(dims.count(d) <= 1 for dims in maps)
                  and all(d in dims for dims in maps[len(maps) - outputs:])), None)
    if split is None:
        return None
    total = 1
    for n in extent.values():
        total *= n
    if total < MIN_ITERATIONS:
        return None
    captured = _captured_values(op)
    if captured is None:
        return None
    constants, memrefs, scalars = captured
    outs = [base_buffer(v) for v in op.opview.outputs]
    if any(base_buffer(m) in outs for m, _ in memrefs):
        return None   # the body reads a buffer the op writes: chunks would race
    operands = list(op.operands)
    slots = [next(j for j in range(i + 1) if operands[j] == operands[i])
             for i in range(len(operands))]
    return {"types": types, "maps": maps, "split": split, "extent": extent[split],
            "constants": constants, "memrefs": memrefs, "scalars": scalars, "slots": slots}


# Regions an outlined op may sit in: a function's body, or loops and branches in it (a
# while loop's 4M-element steps, threefry's rounds, are as large as any top-level op).
_CONTROL_FLOW = ("scf.for", "scf.while", "scf.if", "scf.index_switch", "scf.execute_region")


def _enclosing_function(op: ir.Operation) -> ir.Operation | None:
    """The func.func `op` is in, through structured control flow only; else None."""
    parent = op.parent
    while parent is not None and parent.name in _CONTROL_FLOW:
        parent = parent.parent
    return parent if parent is not None and parent.name == "func.func" else None


# Ops in a body that write memory or call out: chunks would not be independent.
_WRITES = {"memref.store", "memref.atomic_rmw", "memref.generic_atomic_rmw", "memref.copy",
           "func.call", "func.call_indirect", "llvm.call", "llvm.store", "vector.store",
           "vector.transfer_write", "vector.maskedstore", "vector.scatter", "linalg.generic"}


def _scalar_bits(t: ir.Type) -> int | None:
    """The width of a scalar that travels in a 64-bit context slot (index: 64), else None."""
    if isinstance(t, ir.IndexType):
        return 64
    if isinstance(t, ir.IntegerType) and t.width <= 64 and t.is_signless:
        return t.width
    if str(t) in ("f16", "bf16", "f32", "f64"):
        return {"f16": 16, "bf16": 16, "f32": 32, "f64": 64}[str(t)]
    return None


def _captured_values(op: ir.Operation):
    """What the body uses from outside: (the arith.constant ops, to be cloned into the outlined
    function; the memrefs it loads from, as (value, (type, strides)); the other scalars), or
    None if it uses anything else, or writes memory."""
    constants, memrefs, scalars, ok = [], [], [], [True]
    body = op.regions[0].blocks[0]

    def visit(inner):
        inner = inner.operation
        if inner.name in _WRITES:
            ok[0] = False
            return ir.WalkResult.INTERRUPT
        for v in inner.operands:
            owner = v.owner
            if isinstance(owner, ir.Block):
                if owner == body or builders.is_inside(owner.owner, op):
                    continue
            else:
                owner = getattr(owner, "operation", owner)
                if builders.is_inside(owner, op):
                    continue
                if owner.name == "arith.constant":
                    if all(owner != f for f in constants):
                        constants.append(owner)
                    continue
            if isinstance(v.type, ir.MemRefType):
                typed = _static_memref(v.type)
                # only loads: the rebuilt view has offset 0, a type other users would reject
                if typed is None or inner.name != "memref.load" or inner.operands[0] != v:
                    ok[0] = False
                elif all(m != v for m, _ in memrefs):
                    memrefs.append((v, typed))
            elif _scalar_bits(v.type) is not None:
                if all(s != v for s in scalars):
                    scalars.append(v)
            else:
                ok[0] = False
        return ir.WalkResult.ADVANCE
    for inner in body.operations:
        inner.operation.walk(visit)
    return (constants, memrefs, scalars) if ok[0] else None


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


def _descriptor(address: ir.Value, t: ir.MemRefType, strides: list[int], const) -> ir.Value:
    """A memref of type `_strided(t, strides)` viewing the elements from `address` on."""
    i64 = builders.i64()
    d = llvm.UndefOp(_descriptor_type(t.rank)).result
    d = llvm.InsertValueOp(d, address, [0]).result
    d = llvm.InsertValueOp(d, address, [1]).result
    d = llvm.InsertValueOp(d, const(0, i64), [2]).result
    for k, (n, s) in enumerate(zip(t.shape, strides)):
        d = llvm.InsertValueOp(d, const(n, i64), [3, k]).result
        d = llvm.InsertValueOp(d, const(s, i64), [4, k]).result
    return builtin.UnrealizedConversionCastOp([_strided(t, strides)], [d]).result


def _slot(ctx: ir.Value, i: int, type_: ir.Type) -> ir.Value:
    """Context slot i (pointer-sized), loaded as `type_`."""
    address = llvm.GEPOp(builders.pointer(), ctx, [], [i], builders.i64(),
                         llvm.GEPNoWrapFlags.none).result
    return llvm.LoadOp(type_, address).result


def _from_slot(bits: ir.Value, t: ir.Type) -> ir.Value:
    """A captured scalar back from its 64-bit slot (see `_to_slot`)."""
    if isinstance(t, ir.IndexType):
        return arith.index_cast(t, bits)
    width = _scalar_bits(t)
    narrow = bits if width == 64 else arith.trunci(ir.IntegerType.get_signless(width), bits)
    return narrow if isinstance(t, ir.IntegerType) else arith.bitcast(t, narrow)


def _to_slot(v: ir.Value) -> ir.Value:
    """A scalar's bits, zero-extended to i64."""
    i64, t = builders.i64(), v.type
    if isinstance(t, ir.IndexType):
        return arith.index_cast(i64, v)
    width = _scalar_bits(t)
    if not isinstance(t, ir.IntegerType):
        v = arith.bitcast(ir.IntegerType.get_signless(width), v)
    return v if width == 64 else arith.extui(i64, v)


def _build_body(module: ir.Module, symbols: ir.SymbolTable, name: str, op: ir.Operation,
                plan) -> None:
    """The outlined function `name(ctx, begin, end)`: rebuild each operand from its address in
    ctx, take its [begin, end) slice along the split dimension, and run a clone of `op` (with
    the outside constants its body uses cloned, the memrefs it loads from rebuilt, the other
    scalars reloaded, and `linalg.index` of the split dimension shifted by `begin`) on the
    slices."""
    split = plan["split"]
    i64 = builders.i64()
    fn = builders.define_private(module, symbols, name, [builders.pointer(), i64, i64])
    # LLVM function attributes of the function the op came from (fastmath.py's vector width)
    outer = _enclosing_function(op)
    if _PASSTHROUGH in outer.attributes:
        fn.operation.attributes[_PASSTHROUGH] = outer.attributes[_PASSTHROUGH]
    entry = fn.entry_block
    ctx, begin, end = entry.arguments
    # llvm.mlir.constant i64s for the descriptors' sizes and strides, one per value
    const = builders.Constants(entry, builders.llvm_constant, newest_first=True)
    with ir.InsertionPoint(entry):
        ret = func.ReturnOp([])
    with ir.InsertionPoint(ret):
        b = arith.index_cast(builders.index(), begin)
        e = arith.index_cast(builders.index(), end)
        length = arith.subi(e, b)
        addresses, views = {}, []
        for i, ((t, strides), dims) in enumerate(zip(plan["types"], plan["maps"])):
            # One load per distinct operand: an op updating a buffer in place must see one
            # pointer, or LLVM's runtime overlap check sends the loop to its scalar version.
            src = plan["slots"][i]
            if src == i:
                addresses[i] = _slot(ctx, i, builders.pointer())
            m = _descriptor(addresses[src], t, strides, const)
            if split in dims:
                pos = dims.index(split)
                offsets, sizes = [0] * t.rank, list(t.shape)
                offsets[pos], sizes[pos] = b, length
                views.append(memref.subview(m, offsets, sizes, [1] * t.rank,
                                            result_type=_subview_type(t, strides, pos)))
            else:
                views.append(memref.CastOp(_strided(t, strides), m).result)
        copies = [(c.results[0], c.clone().results[0]) for c in plan["constants"]]
        n = len(plan["types"])
        for k, (v, (t, strides)) in enumerate(plan["memrefs"]):
            copies.append((v, _descriptor(_slot(ctx, n + k, builders.pointer()), t, strides,
                                          const)))
        n += len(plan["memrefs"])
        for k, v in enumerate(plan["scalars"]):
            copies.append((v, _from_slot(_slot(ctx, n + k, i64), v.type)))
        clone = op.clone()
    for i, v in enumerate(views):
        clone.operands[i] = v

    shifted = []
    read_only = [v for v, _ in plan["memrefs"]]

    def remap(inner):
        inner = inner.operation
        for i, v in enumerate(inner.operands):
            for old, new in copies:
                if v == old:
                    inner.operands[i] = new
                    if inner.name == "memref.load" and any(old == m for m in read_only):
                        # for kiln-hoist-invariant-loads: no write of this op aliases it
                        inner.attributes[invariant_loads.MARK] = ir.UnitAttr.get()
        if inner.name == "linalg.index" and ir.IntegerAttr(inner.attributes["dim"]).value == split:
            shifted.append(inner)
        return ir.WalkResult.ADVANCE
    for inner in clone.regions[0].blocks[0].operations:
        inner.operation.walk(remap)
    # Chunks count the split dimension from 0: its global index is begin + the chunk's.
    for index_op in shifted:
        with ir.InsertionPoint.after(index_op), index_op.location:
            global_index = arith.addi(index_op.result, b)
        index_op.result.replace_all_uses_except(global_index, global_index.owner.operation)


def parallelize(module: ir.Module) -> None:
    unroll_windows(module)
    copies_as_generics(module, MIN_ITERATIONS, set(_ELEM_BYTES))
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
    """Just before `op`: ctx = the operands' element-0 addresses, then the captured memrefs'
    element-0 addresses, then the captured scalars' bits; kiln_parallel_for(@name, ctx,
    extent)."""
    captured = [v for v, _ in plan["memrefs"]]
    k = len(op.operands) + len(captured) + len(plan["scalars"])
    i64 = builders.i64()
    # ctx lives in the function's entry block: an alloca in a loop body would take more
    # stack on every iteration.
    entry = _enclosing_function(op).regions[0].blocks[0]
    at_top = op.block == entry
    with ir.InsertionPoint(op) if at_top else ir.InsertionPoint.at_block_begin(entry):
        alloca = memref.AllocaOp(ir.MemRefType.get([k], i64), [], [])
    with ir.InsertionPoint(op):
        const = builders.Constants(op.block, after=alloca.operation if at_top else None)
        for i in range(k):   # the slots' indices first, then the element sizes
            const(i)
        memrefs = list(zip(plan["types"], op.operands)) + \
            [(typed, v) for v, typed in plan["memrefs"]]
        for size in sorted({_ELEM_BYTES[str(t.element_type)] for (t, _), _ in memrefs}):
            const(size)
        context = alloca.result
        for i, ((t, _), v) in enumerate(memrefs):
            address = builders.element_address(v, _ELEM_BYTES[str(t.element_type)], const)
            memref.StoreOp(arith.index_cast(i64, address), context, [const(i)])
        for i, v in enumerate(plan["scalars"], start=len(memrefs)):
            memref.StoreOp(_to_slot(v), context, [const(i)])
        ctx = builders.as_pointer(memref.ExtractAlignedPointerAsIndexOp(context).result)
        extent = arith.ConstantOp(i64, ir.IntegerAttr.get(i64, plan["extent"])).result
        body = func.ConstantOp(_body_type(), ir.FlatSymbolRefAttr.get(name)).result
        func.CallOp([], ir.FlatSymbolRefAttr.get(_PARALLEL_FOR), [body, ctx, extent])
