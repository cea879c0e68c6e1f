"""kiln-fuse-rows: run a chain of row-wise loop nests one block of rows at a time (XLA:CPU's
reduction fusion / multi-output fusion does the same).

Softmax, layer norm, RMS norm and log-softmax are memory-bound chains of linalg ops over
the same rows: a reduction along each row (max, sum, sum of squares), elementwise work
that reads the per-row results, another reduction, more elementwise work. Bufferized, each
op is its own loop nest streaming the whole array through memory (softmax on 8192x1024:
four passes over 32 MB). This pass puts a run of consecutive such ops in one loop over
blocks of rows and runs every op on the block (a clone of the op on subviews of its
operands), so the block's rows are read from memory once and stay in L1/L2 for the ops
after the first. The loop over blocks is outlined onto Kiln's thread pool
(`kiln_parallel_for`, as parallel.py does for one op) when the work is large.

The "rows" are the leading k iteration dimensions that every op of the run has as parallel
dimensions of the same extents (k = 3 for attention's 4x8x512x512 scores). The run is
legal when every buffer an op of the run writes is indexed, in every access of the run, by
exactly those dimensions at its first k positions: then an op at row r touches only row r
of what the others write, so doing all ops row block by row block computes every element
from the same values, with the same ops in the same order, as op after op (bit-identical).
Buffers that are only read may be indexed any way (gamma and beta: by the columns only).
Anything else between the ops (a call, a view, a contraction) ends the run; allocations
and constants between them are hoisted above it.

A temporary that only the run uses and whose first access in it writes it whole (layer
norm's 16 MB `x - mean`) becomes one block-sized buffer per thread: it never reaches
memory. The block is chosen so that one block of every buffer fits in BLOCK_BYTES.
Runs need two loop nests at least, one reading what another wrote (fills and copies join
them but do not count). Measured on the 2-core VM, one thread, CPU time per call: softmax
8192x1024 25 -> 13 ms, layer norm 8192x1024 15 -> 9.5 ms, bf16 layer norm 4096x1024
8 -> 2.2 ms (block sizes from 16 KB to 192 KB within 10% of each other).

Runs after kiln-order-loops (the outermost dimension is the one to block) and before
kiln-parallelize (which leaves the nested ops alone; a lone op is still its business).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from torch_mlir import ir
from torch_mlir.dialects import arith, builtin, func, llvm, memref, scf

from . import builders, parallel
from .loop_order import base_buffer

BLOCK_BYTES = 32 * 1024   # one block of every buffer of the run: within L1 (48 KB here)
MIN_BYTES = 1 << 18       # smaller runs stay in cache without help
MAX_ROW_BYTES = 1 << 20   # rows larger than this do not stay in cache anyway
_ELEM_BYTES = {"f16": 2, "bf16": 2, "f32": 4, "f64": 8, "i1": 1, "i8": 1, "i16": 2, "i32": 4,
               "i64": 8}
_HOISTABLE = ("arith.constant", "memref.alloc", "memref.alloca")
MARK = "kiln.fused_rows"   # on the outermost loop of a run: the number of ops it runs
_PARALLEL_FOR = "kiln_parallel_for"   # runtime/kiln_parallel.c: body(ctx, begin, end) on threads


def _body_type() -> ir.FunctionType:
    return ir.FunctionType.get([builders.pointer(), builders.i64(), builders.i64()], [])


def _descriptor_type(rank: int) -> ir.Type:
    """The LLVM struct of a ranked memref descriptor: (allocated, aligned, offset, sizes,
    strides)."""
    ptr, i64 = builders.pointer(), builders.i64()
    array = llvm.ArrayType.get(i64, rank)
    return llvm.StructType.get_literal([ptr, ptr, i64, array, array])


def _strided(t: ir.MemRefType, strides: list[int]) -> ir.MemRefType:
    """`t` with its strides spelled out (offset 0)."""
    return ir.MemRefType.get(list(t.shape), t.element_type, ir.StridedLayoutAttr.get(0, strides))


@dataclass
class _Access:
    """One memref operand of an op: which iteration dimension each of its positions is
    indexed by (-1: a constant index; None: any other expression)."""
    value: ir.Value
    dims: list
    written: bool
    amap: ir.AffineMap | None = None   # a linalg.generic's indexing map (fill, copy: none)


@dataclass
class _OpInfo:
    op: ir.Operation
    iterators: list[str]
    extents: list[int]
    accesses: list[_Access]
    full_writes: list[ir.Value] = field(default_factory=list)   # written whole, not read
    indexed: int = 1 << 30    # the lowest dimension the body reads with linalg.index


def _memref(value: ir.Value) -> ir.MemRefType | None:
    try:
        t = ir.MemRefType(value.type)
    except ValueError:
        return None
    strides, _ = t.get_strides_and_offset()
    dynamic = ir.ShapedType.get_dynamic_stride_or_offset()
    if not t.has_static_shape or any(s == dynamic for s in strides) or t.rank == 0 or \
            str(t.element_type) not in _ELEM_BYTES:
        return None
    return t


def _dim_positions(amap: ir.AffineMap) -> list:
    out = []
    for e in amap.results:
        e = e.maybe_downcast()
        if isinstance(e, ir.AffineDimExpr):
            out.append(e.position)
        elif isinstance(e, ir.AffineConstantExpr):
            out.append(-1)
        else:
            out.append(None)
    return out


def _analyze(op: ir.Operation) -> _OpInfo | None:
    """What the pass needs to know of an op it can run by blocks of rows, or None."""
    if op.name == "linalg.fill":
        if op.results or _memref(op.operands[1]) is None or \
                not _defined_by_constant(op.operands[0]):
            return None
        target = op.operands[1]
        t = _memref(target)
        dims = list(range(t.rank))
        return _OpInfo(op, ["parallel"] * t.rank, list(t.shape),
                       [_Access(target, dims, True)], [target])
    if op.name == "memref.copy":
        source, target = op.operands
        ts, tt = _memref(source), _memref(target)
        if ts is None or tt is None or ts.shape != tt.shape or source == target:
            return None
        dims = list(range(tt.rank))
        return _OpInfo(op, ["parallel"] * tt.rank, list(tt.shape),
                       [_Access(source, dims, False), _Access(target, dims, True)], [target])
    if op.name != "linalg.generic" or op.results or len(op.regions[0].blocks) != 1:
        return None
    iterators = ["reduction" if "reduction" in str(a) else "parallel"
                 for a in op.attributes["iterator_types"]]
    n_in, n_out = list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))
    maps = [ir.AffineMapAttr(m).value for m in op.attributes["indexing_maps"]]
    extents: list = [None] * len(iterators)
    accesses = []
    for k, (value, amap) in enumerate(zip(op.operands, maps)):
        t = _memref(value)
        if t is None or amap.n_symbols:
            return None
        dims = _dim_positions(amap)
        for d, n in zip(dims, t.shape):
            if d is not None and d >= 0:
                extents[d] = n
        accesses.append(_Access(value, dims, k >= n_in, amap))
    if any(e is None for e in extents) or not _only_constants_captured(op):
        return None
    info = _OpInfo(op, iterators, extents, accesses)
    body = op.regions[0].blocks[0]

    def index_reads(inner):   # blocks renumber the row dimensions
        if inner.operation.name == "linalg.index":
            info.indexed = min(info.indexed,
                               ir.IntegerAttr(inner.operation.attributes["dim"]).value)
        return ir.WalkResult.ADVANCE
    for inner in body.operations:
        inner.operation.walk(index_reads)
    ins = [a.value for a in accesses[:n_in]]
    for k in range(n_in, n_in + n_out):
        amap = maps[k]
        if all(it == "parallel" for it in iterators) and amap.is_permutation and \
                not list(body.arguments[k].uses) and accesses[k].value not in ins:
            info.full_writes.append(accesses[k].value)
    return info


def _defined_by_constant(value: ir.Value) -> bool:
    owner = value.owner
    owner = getattr(owner, "operation", owner)
    return isinstance(owner, ir.Operation) and owner.name == "arith.constant"


def _captured(op: ir.Operation) -> list[ir.Operation] | None:
    """The outside arith.constant ops `op`'s body uses (None: it uses another outside value)."""
    found, ok = [], [True]
    if op.name != "linalg.generic":
        return []

    def visit(inner):
        for v in inner.operation.operands:
            owner = v.owner
            if isinstance(owner, ir.Block):
                if not builders.is_inside(owner.owner, op):
                    ok[0] = False
                continue
            owner = getattr(owner, "operation", owner)
            if builders.is_inside(owner, op):
                continue
            if owner.name != "arith.constant":
                ok[0] = False
            elif all(owner != f for f in found):
                found.append(owner)
        return ir.WalkResult.ADVANCE
    for inner in op.regions[0].blocks[0].operations:
        inner.operation.walk(visit)
    return found if ok[0] else None


def _only_constants_captured(op: ir.Operation) -> bool:
    return _captured(op) is not None


# -- runs --------------------------------------------------------------------------------

def _row_dims(infos: list[_OpInfo]) -> tuple[int, list[int]]:
    """(k, extents): the leading dimensions every op of `infos` can be blocked along (k = 0:
    none) without an op reading another row of what the run writes."""
    written = {base_buffer(a.value) for i in infos for a in i.accesses if a.written}
    if any(base_buffer(a.value) != a.value for i in infos for a in i.accesses if a.written):
        return 0, []
    k = min(len(i.iterators) for i in infos)
    k = min(k, max(1, max(len(i.iterators) for i in infos) - 1))   # keep the inner dimension
    for i in infos:
        k = min(k, i.indexed)
        limit = 0
        while limit < k and i.iterators[limit] == "parallel" and \
                i.extents[limit] == infos[0].extents[limit]:
            limit += 1
        k = limit
        for a in i.accesses:
            if base_buffer(a.value) in written:
                if a.value not in written:
                    return 0, []        # a view of a written buffer
                j = 0
                while j < k and j < len(a.dims) and a.dims[j] == j:
                    j += 1
                k = j
                # a written buffer must not be indexed by a row dimension elsewhere either
                if any(d is not None and 0 <= d < k for d in a.dims[k:]):
                    return 0, []
            for j in range(k):       # each row dimension: one plain position at most
                if a.dims.count(j) > 1:
                    k = j
                    break
            if any(d is None for d in a.dims) and not _expressions_avoid(a, k):
                return 0, []   # an expression of a row dimension: blocks would cut it
    return k, list(infos[0].extents[:k])


def _expressions_avoid(access: _Access, k: int) -> bool:
    """Whether the index expressions of `access` (other than plain dimensions) leave the
    first k dimensions alone."""
    if access.amap is None:
        return False
    for expr, d in zip(access.amap.results, access.dims):
        if d is None and any(builders.uses_dim(expr, j) for j in range(k)):
            return False
    return True


@dataclass
class _Run:
    infos: list[_OpInfo]
    hoisted: list[ir.Operation]
    k: int = 0
    extents: list = field(default_factory=list)


def _runs(block: ir.Block) -> list[_Run]:
    runs, current, hoisted = [], [], []

    def close():   # two loop nests at least (a fill and its reduction gain nothing)
        if sum(1 for i in current if i.op.name == "linalg.generic") >= 2 and \
                _passes_values(current):
            k, extents = _row_dims(current)
            if k:
                runs.append(_Run(list(current), list(hoisted), k, extents))
    for op in [o.operation for o in block.operations]:
        info = _analyze(op)
        if info is not None and (not current or _row_dims(current + [info])[0] > 0):
            current.append(info)
            continue
        if current and op.name in _HOISTABLE and not op.operands:
            hoisted.append(op)
            continue
        close()
        current, hoisted = ([info] if info is not None else []), []
    close()
    return runs


def _passes_values(infos: list[_OpInfo]) -> bool:
    """Whether a loop nest of the run reads what another one wrote (else blocking them
    together keeps nothing in cache that would not be there anyway)."""
    nests = [i for i in infos if i.op.name == "linalg.generic"]
    for k, consumer in enumerate(nests):
        read = [a.value for a in consumer.accesses if not a.written]
        if any(a.written and a.value in read for p in nests[:k] for a in p.accesses):
            return True
    return False


# -- the rewrite -------------------------------------------------------------------------

def _bytes(t: ir.MemRefType) -> int:
    n = _ELEM_BYTES[str(t.element_type)]
    for s in t.shape:
        n *= s
    return n


def _temporaries(run: _Run, block: ir.Block) -> list[ir.Value]:
    """Allocations only the run uses, written whole by their first access in it."""
    members = [i.op for i in run.infos]
    out = []
    for info in run.infos:
        for a in info.accesses:
            v = a.value
            owner = getattr(v.owner, "operation", v.owner)
            if v in out or not isinstance(owner, ir.Operation) or \
                    owner.name != "memref.alloc" or owner.block != block or owner.operands or \
                    a.dims[:run.k] != list(range(run.k)):
                continue
            t = ir.MemRefType(v.type)
            if not builders.has_row_major_strides(t):   # the block buffer is laid out row-major
                continue
            users = [getattr(u.owner, "operation", u.owner) for u in v.uses]
            if any(u not in members and u.name != "memref.dealloc" for u in users):
                continue
            first = next(i for i in run.infos if any(x.value == v for x in i.accesses))
            if v in first.full_writes:
                out.append(v)
    return out


def fuse_rows(module: ir.Module) -> None:
    for fn in [o.operation for o in module.body.operations]:
        if fn.name != "func.func" or not fn.regions[0].blocks:
            continue
        for block in fn.regions[0].blocks:
            for run in _runs(block):
                _rewrite(module, run, block)


def _rewrite(module: ir.Module, run: _Run, block: ir.Block) -> None:
    values: list[ir.Value] = []
    for info in run.infos:
        for a in info.accesses:
            if a.value not in values:
                values.append(a.value)
    rows = 1
    for n in run.extents:
        rows *= n
    total = sum(_bytes(ir.MemRefType(v.type)) for v in values)
    row_bytes = total // rows
    if total < MIN_BYTES or row_bytes > MAX_ROW_BYTES:
        return
    block_rows = 1   # a power of two: blocks divide the rows evenly more often
    while block_rows * 2 * row_bytes <= BLOCK_BYTES and block_rows * 2 <= run.extents[-1]:
        block_rows *= 2
    temps = _temporaries(run, block)
    first = run.infos[0].op
    for op in run.hoisted:
        op.move_before(first)
    work = max(rows * _inner_iterations(i, run.k) for i in run.infos)
    split = next((j for j, n in enumerate(run.extents) if n > 1), None)
    with first.location:
        if split is not None and work >= parallel.MIN_ITERATIONS:   # read now: tests change it
            _outline(module, run, values, temps, block_rows, split)
        else:
            with ir.InsertionPoint(first):
                mapping = {v: v for v in values}
                _emit_blocks(run, mapping, temps, block_rows, None, None, None)
    for info in run.infos:
        info.op.erase()
    for v in temps:
        for u in list(v.uses):
            getattr(u.owner, "operation", u.owner).erase()
        getattr(v.owner, "operation", v.owner).erase()


def _inner_iterations(info: _OpInfo, k: int) -> int:
    n = 1
    for e in info.extents[k:]:
        n *= e
    return n


def _index(n: int) -> ir.Value:
    idx = builders.index()
    return arith.ConstantOp(idx, ir.IntegerAttr.get(idx, n)).result


def _emit_blocks(run: _Run, mapping: dict, temps: list, block_rows: int,
                 split, begin, end) -> None:
    """At the insertion point: loops over the row dimensions (the `split` one over
    [begin, end) when given), the last one in steps of `block_rows`; in the innermost, each
    op of the run on its operands' block."""
    k = run.k
    one, zero = _index(1), _index(0)
    blocks = {}
    for v in temps:   # one block-sized buffer per temporary
        t = ir.MemRefType(v.type)
        shape = [1] * (k - 1) + [block_rows] + list(t.shape[k:])
        blocks[v] = memref.AllocaOp(ir.MemRefType.get(shape, t.element_type), [], [],
                                    alignment=64).result
    ivs, sizes = [], []

    def level(j):
        if j == k:
            _blocks_of_ops(run, mapping, blocks, ivs, sizes)
            return
        last = j == k - 1
        lower = begin if j == split else zero
        upper = end if j == split else _index(run.extents[j])
        loop = scf.ForOp(lower, upper, _index(block_rows) if last else one)
        if j == 0:   # for readers of the IR (and tests): how many ops share these loops
            loop.operation.attributes[MARK] = ir.IntegerAttr.get(builders.i64(), len(run.infos))
        with ir.InsertionPoint(loop.body):
            iv = loop.induction_variable
            ivs.append(iv)
            if not last or block_rows == 1:
                sizes.append(1)
            elif j != split and run.extents[j] % block_rows == 0:
                sizes.append(block_rows)
            else:   # the last block may be smaller
                sizes.append(builders.partial_block(block_rows, iv, upper))
            level(j + 1)
            scf.YieldOp([])
        ivs.pop()
        sizes.pop()
    level(0)


def _view(value: ir.Value, dims: list, ivs, sizes, at_origin: bool) -> ir.Value:
    """`value`'s block: rows ivs[j] .. + sizes[j] where row dimension j indexes it."""
    if not any(d is not None and 0 <= d < len(ivs) for d in dims):
        return value   # not indexed by the rows (layer norm's gamma): read whole
    t = ir.MemRefType(value.type)
    strides, _ = t.get_strides_and_offset()
    offsets, part = [0] * t.rank, list(t.shape)
    for p, d in enumerate(dims):
        if d is not None and 0 <= d < len(ivs):
            offsets[p] = 0 if at_origin else ivs[d]
            part[p] = sizes[d]
    dynamic_size = ir.ShapedType.get_dynamic_size()
    shape = [s if isinstance(s, int) else dynamic_size for s in part]
    offset = 0 if at_origin else ir.ShapedType.get_dynamic_stride_or_offset()
    layout = ir.StridedLayoutAttr.get(offset, strides)
    return memref.subview(value, offsets, part, [1] * t.rank,
                          result_type=ir.MemRefType.get(shape, t.element_type, layout))


def _blocks_of_ops(run: _Run, mapping: dict, blocks: dict, ivs, sizes) -> None:
    views: dict = {}
    for info in run.infos:
        operands = []
        for a in info.accesses:
            key = (a.value, tuple(a.dims))   # an in-place update reads and writes one view
            if key not in views:
                if a.value in blocks:
                    views[key] = _view(blocks[a.value], a.dims, ivs, sizes, True)
                else:
                    views[key] = _view(mapping[a.value], a.dims, ivs, sizes, False)
            operands.append(views[key])
        clone = info.op.clone()
        memrefs = [i for i, v in enumerate(info.op.operands) if _memref(v) is not None]
        for i, v in zip(memrefs, operands):
            clone.operands[i] = v
        for i, v in enumerate(clone.operands):     # fill values
            if i not in memrefs and v in mapping:
                clone.operands[i] = mapping[v]
        _remap_body(clone, mapping)


def _remap_body(op: ir.Operation, mapping: dict) -> None:
    if not op.regions or not op.regions[0].blocks:
        return

    def remap(inner):
        for i, v in enumerate(inner.operation.operands):
            if v in mapping:
                inner.operation.operands[i] = mapping[v]
        return ir.WalkResult.ADVANCE
    for inner in op.regions[0].blocks[0].operations:
        inner.operation.walk(remap)


# -- on all cores ------------------------------------------------------------------------

def _outline(module: ir.Module, run: _Run, values: list, temps: list, block_rows: int,
             split: int) -> None:
    """body(ctx, begin, end): the blocks of rows [begin, end) along row dimension `split`;
    before the run's first op, kiln_parallel_for(body, ctx, extent)."""
    symbols = ir.SymbolTable(module.operation)
    with ir.Location.unknown():
        builders.declare_external(module, symbols, _PARALLEL_FOR,
                                  [_body_type(), builders.pointer(), builders.i64()])
    name = builders.unique_symbol(symbols, "kiln_rows_body")
    passed = [v for v in values if v not in temps]
    constants = []
    for info in run.infos:
        found = _captured(info.op) or []
        if info.op.name == "linalg.fill":
            found = [getattr(info.op.operands[0].owner, "operation", info.op.operands[0].owner)]
        constants += [c for c in found if all(c != x for x in constants)]
    i64 = builders.i64()
    fn = builders.define_private(module, symbols, name, [builders.pointer(), i64, i64])
    entry = fn.entry_block
    ctx, begin, end = entry.arguments
    with ir.InsertionPoint(entry):
        ret = func.ReturnOp([])
    with ir.InsertionPoint(ret):
        zero = builders.llvm_constant(0, i64)
        mapping = {}
        for i, v in enumerate(passed):
            t = ir.MemRefType(v.type)
            strides, _ = t.get_strides_and_offset()
            slot = llvm.GEPOp(builders.pointer(), ctx, [], [i], i64,
                              llvm.GEPNoWrapFlags.none).result
            address = llvm.LoadOp(builders.pointer(), slot).result
            d = llvm.UndefOp(_descriptor_type(t.rank)).result
            d = llvm.InsertValueOp(d, address, [0]).result
            d = llvm.InsertValueOp(d, address, [1]).result
            d = llvm.InsertValueOp(d, zero, [2]).result
            for k, (n, s) in enumerate(zip(t.shape, strides)):
                d = llvm.InsertValueOp(d, builders.llvm_constant(n, i64), [3, k]).result
                d = llvm.InsertValueOp(d, builders.llvm_constant(s, i64), [4, k]).result
            full = builtin.UnrealizedConversionCastOp([_strided(t, strides)], [d]).result
            mapping[v] = full
        for c in constants:
            mapping[c.results[0]] = c.clone().results[0]
        b = arith.index_cast(builders.index(), begin)
        e = arith.index_cast(builders.index(), end)
        _emit_blocks(run, mapping, temps, block_rows, split, b, e)
    _call(run.infos[0].op, passed, name, run.extents[split])


def _call(before: ir.Operation, passed: list, name: str, extent: int) -> None:
    """Just before `before`: ctx = the passed buffers' first-element addresses;
    kiln_parallel_for(@name, ctx, extent)."""
    i64 = builders.i64()
    with ir.InsertionPoint(before):
        alloca = memref.AllocaOp(ir.MemRefType.get([len(passed)], i64), [], [])
        const = builders.Constants(before.block, after=alloca.operation)
        context = alloca.result
        for i, v in enumerate(passed):
            width = _ELEM_BYTES[str(ir.MemRefType(v.type).element_type)]
            address = builders.element_address(v, width, const)
            memref.StoreOp(arith.index_cast(i64, address), context, [const(i)])
        ctx = builders.as_pointer(memref.ExtractAlignedPointerAsIndexOp(context).result)
        count = arith.ConstantOp(i64, ir.IntegerAttr.get(i64, extent)).result
        body = func.ConstantOp(_body_type(), ir.FlatSymbolRefAttr.get(name)).result
        func.CallOp([], ir.FlatSymbolRefAttr.get(_PARALLEL_FOR), [body, ctx, count])
