"""Row reductions as block reductions (`kiln-gpu-block-reductions`): the threads of a block
share a row and combine their partials through warp shuffles and shared memory (XLA: the
row-reduction emitter).

A linalg.generic whose only reduction dimension is innermost and indexes its inputs'
contiguous dimension (a row sum, softmax's max and sum, both phases of a full reduction)
becomes a gpu.launch:
- rows longer than a warp, and a lone row: one block per row, of
  `min(256, row rounded up to 32)` threads.
  1. thread t reduces elements t, t + T, t + 2T, ... of its row (consecutive threads read
     consecutive addresses), starting from its first element, so no identity is needed;
  2. each warp combines its 32 partials with `gpu.shuffle xor` 16, 8, 4, 2, 1;
  3. lane 0 of each warp writes its warp's partial to shared memory, a barrier, and warp 0
     combines those the same way and combines the result into the output element.
- shorter rows: each row gets the aligned segment of `s` lanes (the power of two at least
  the row; 256 / s rows to a block of 256), and steps 1-2 with shuffles s/2, ..., 1.
A lane may have no element (a row shorter than the block): every partial travels with a
flag saying whether it holds one, and partials without one are skipped.

The generic's body must be `combine(f(inputs), accumulator)` with one accumulator: the ops
that use the accumulator are the combiner, which combines two partials too (columns.py and
products.py split bodies the same way: `split_body`). Column reductions (the reduction
dimension strides through memory) are columns.py's: a block per 32 output columns.
"""
from __future__ import annotations

from dataclasses import dataclass

from torch_mlir import ir
from torch_mlir.dialects import arith, gpu, memref, scf

from ..codegen.builders import indices_of, uses_dim
from ..ir_util import clone_ops
from .kernel_ir import Launch, c, rewrite_generics, workgroup_memref

WARP = 32
MAX_BLOCK = 256


def block_reductions(module: ir.Module) -> None:
    def plan(op: ir.Operation):
        body = _plan(op)
        return None if body is None else (op, body)
    rewrite_generics(module, plan, lambda found: _emit(*found))


@dataclass
class ReductionBody:
    """What _emit needs of a generic: its extents and its body split into the element's
    computation (from inputs and indices), the combiner (from the accumulator) and
    constants; `element` is the one value the combiner reads besides the accumulator."""
    op: ir.Operation
    extents: list[int]
    element_ops: list[ir.Operation]
    combine_ops: list[ir.Operation]
    constant_ops: list[ir.Operation]
    element: ir.Value
    acc: ir.Value
    result: ir.Value


def _maps(op) -> list[ir.AffineMap]:
    return [ir.AffineMapAttr(m).value for m in op.attributes["indexing_maps"]]


def _packable(t: ir.Type) -> bool:
    for kind in (ir.IntegerType, ir.FloatType):
        try:
            return kind(t).width in (1, 8, 16, 32, 64)
        except ValueError:
            pass
    return False


def _plan(op: ir.Operation) -> ReductionBody | None:
    if op.results or "indexing_maps" not in op.attributes:
        return None
    iterators = [str(a) for a in op.attributes["iterator_types"]]
    n_dims = len(iterators)
    if n_dims == 0 or "reduction" not in iterators[-1] \
            or any("reduction" in it for it in iterators[:-1]):
        return None
    n_ins, n_outs = list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))
    if n_ins < 1 or n_outs != 1:
        return None
    operands, maps = list(op.operands), _maps(op)
    extents: list = [None] * n_dims
    for value, amap in zip(operands, maps):
        try:
            t = ir.MemRefType(value.type)
        except ValueError:
            return None
        if not t.has_static_shape:
            return None
        for expr, n in zip(amap.results, t.shape):
            e = expr.maybe_downcast()
            if isinstance(e, ir.AffineDimExpr):
                extents[e.position] = n
    if any(e is None for e in extents):
        return None
    rows, length = 1, extents[-1]
    for n in extents[:-1]:
        rows *= n
    if rows == 0 or length == 0 or rows >= 1 << 31:
        return None
    reduced = n_dims - 1
    if any(uses_dim(e, reduced) for e in maps[-1].results):
        return None
    # a column reduction (the row strides through memory): one thread per output is faster
    if rows > 1:
        for value, amap in zip(operands[:n_ins], maps[:n_ins]):
            results = list(amap.results)
            if any(uses_dim(e, reduced) for e in results[:-1]):
                return None
            # a view whose last dimension is not contiguous (a transposed subview)
            if results and uses_dim(results[-1], reduced) \
                    and ir.MemRefType(value.type).get_strides_and_offset()[0][-1] != 1:
                return None
    out = operands[-1]
    if any(v == out for v in operands[:n_ins]):
        return None
    return split_body(op, extents, n_ins)


def split_body(op, extents, n_ins) -> ReductionBody | None:
    """The body as element ops (from inputs and indices), combiner ops (from the
    accumulator) and constants; None unless the combiner reads one element value of the
    accumulator's type."""
    block = op.regions[0].blocks[0]
    args = list(block.arguments)
    acc = args[n_ins]
    if not _packable(acc.type):
        return None
    ops = [o.operation for o in block.operations]
    terminator, ops = ops[-1], ops[:-1]
    if terminator.name != "linalg.yield" or len(terminator.operands) != 1:
        return None
    from_args, from_acc = set(args[:n_ins]), {acc}
    element_ops, combine_ops, constant_ops = [], [], []
    for inner in ops:
        if inner.regions:
            return None
        operands = list(inner.operands)
        if any(v in from_acc for v in operands):
            combine_ops.append(inner)
            from_acc.update(inner.results)
        elif inner.name == "linalg.index" or any(v in from_args for v in operands):
            element_ops.append(inner)
            from_args.update(inner.results)
        else:
            constant_ops.append(inner)
    result = terminator.operands[0]
    if result not in from_acc or result == acc:
        return None
    elements = {v for inner in combine_ops for v in inner.operands
                if v not in from_acc and v in from_args}
    if len(elements) != 1:
        return None
    element = elements.pop()
    if element.type != acc.type:
        return None
    return ReductionBody(op, extents, element_ops, combine_ops, constant_ops, element, acc, result)


# -- emission -----------------------------------------------------------------------------

class Packing:
    """A value of the accumulator's type as 32 or 64 bits, for shuffles and shared memory."""

    def __init__(self, t: ir.Type):
        self.t = t
        try:
            self.width, self.is_float = ir.FloatType(t).width, True
        except ValueError:
            self.width, self.is_float = ir.IntegerType(t).width, False
        self.packed = ir.IntegerType.get_signless(64 if self.width == 64 else 32)

    def pack(self, v: ir.Value) -> ir.Value:
        if self.is_float:
            v = arith.bitcast(ir.IntegerType.get_signless(self.width), v)
        return v if self.width in (32, 64) else arith.extui(self.packed, v)

    def unpack(self, v: ir.Value) -> ir.Value:
        if self.width not in (32, 64):
            v = arith.trunci(ir.IntegerType.get_signless(self.width), v)
        return arith.bitcast(self.t, v) if self.is_float else v

    def zero(self) -> ir.Value:
        return self.unpack(arith.constant(self.packed, 0))


def _segment(rows: int, length: int) -> int | None:
    """Lanes per row for rows of a warp's length or shorter: the power of two at least the
    row, several rows to a block. None: a block per row (longer rows, a lone row)."""
    if length > WARP or rows == 1:
        return None
    return 1 << (length - 1).bit_length()


def _emit(op: ir.Operation, plan: ReductionBody) -> None:
    operands, maps = list(op.operands), _maps(op)
    n_ins = len(operands) - 1
    extents = plan.extents
    length = extents[-1]
    rows = 1
    for n in extents[:-1]:
        rows *= n
    segment = _segment(rows, length)
    block_per_row = segment is None
    if block_per_row:
        segment = WARP
        threads = min(MAX_BLOCK, -(-length // WARP) * WARP)
        rows_per_block, blocks = 1, rows
    else:                 # short rows: `segment` lanes each, MAX_BLOCK // segment to a block
        threads = MAX_BLOCK
        rows_per_block = MAX_BLOCK // segment
        blocks = -(-rows // rows_per_block)
    warps = threads // WARP
    shared = block_per_row and warps > 1
    packing = Packing(plan.acc.type)
    i32 = ir.IntegerType.get_signless(32)
    attributions = [workgroup_memref([warps], packing.packed),
                    workgroup_memref([warps], i32)] if shared else []
    with Launch((blocks, 1, 1), (threads, 1, 1), attributions) as launch:
        block_id, thread_id = launch.block_id[0], launch.thread_id[0]
        constants: dict = {}
        clone_ops(plan.constant_ops, constants, ir.InsertionPoint.current)
        if block_per_row:
            row, position = block_id, thread_id
            has = arith.cmpi(arith.CmpIPredicate.ult, position, c(length))
        else:
            row = arith.addi(arith.muli(block_id, c(rows_per_block)),
                             arith.divui(thread_id, c(segment)))
            position = arith.remui(thread_id, c(segment))
            has = arith.andi(arith.cmpi(arith.CmpIPredicate.ult, row, c(rows)),
                             arith.cmpi(arith.CmpIPredicate.ult, position, c(length)))
        # the output element's indices from the row's linear index
        outer, rest = [], row
        for n in reversed(extents[:-1]):
            outer.insert(0, arith.remui(rest, c(n)))
            rest = arith.divui(rest, c(n))

        def element(j: ir.Value) -> ir.Value:
            ivs = outer + [j]
            mapping = dict(constants)
            for k in range(n_ins):
                mapping[plan.op.regions[0].blocks[0].arguments[k]] = memref.load(
                    operands[k], indices_of(maps[k], ivs))
            for inner in plan.element_ops:
                if inner.name == "linalg.index":
                    mapping[inner.results[0]] = ivs[ir.IntegerAttr(inner.attributes["dim"]).value]
                else:
                    clone_ops([inner], mapping, ir.InsertionPoint.current)
            return mapping[plan.element]

        def combine(value: ir.Value, accumulator: ir.Value) -> ir.Value:
            mapping = dict(constants)
            mapping[plan.element], mapping[plan.acc] = value, accumulator
            clone_ops(plan.combine_ops, mapping, ir.InsertionPoint.current)
            return mapping[plan.result]

        # 1. each lane's elements: its position, then every `threads`-th (a block per row)
        first = scf.IfOp(has, [plan.acc.type], has_else=True)
        with ir.InsertionPoint(first.then_block):
            scf.YieldOp([element(position)])
        with ir.InsertionPoint(first.else_block):
            scf.YieldOp([packing.zero()])
        partial = first.results[0]
        if block_per_row and length > threads:
            loop = scf.ForOp(arith.addi(position, c(threads)), c(length), c(threads),
                             [partial])
            with ir.InsertionPoint(loop.body):
                scf.YieldOp([combine(element(loop.induction_variable),
                                     loop.inner_iter_args[0])])
            partial = loop.results[0]
        partial, valid = _warp_reduce(partial, has, packing, combine, segment)
        lane = arith.remui(thread_id, c(WARP))
        leader = arith.cmpi(arith.CmpIPredicate.eq, arith.remui(lane, c(segment))
                            if segment < WARP else lane, c(0))
        if shared:
            # 3. one partial per warp through shared memory, combined by warp 0
            values_smem, flags_smem = launch.shared
            warp = arith.divui(thread_id, c(WARP))
            store = scf.IfOp(leader)
            with ir.InsertionPoint(store.then_block):
                memref.store(packing.pack(partial), values_smem, [warp])
                memref.store(arith.extui(i32, valid), flags_smem, [warp])
                scf.YieldOp([])
            gpu.barrier()
            first_warp = scf.IfOp(arith.cmpi(arith.CmpIPredicate.eq, warp, c(0)))
            with ir.InsertionPoint(first_warp.then_block):
                present = arith.cmpi(arith.CmpIPredicate.ult, lane, c(warps))
                read = scf.IfOp(present, [plan.acc.type, ir.IntegerType.get_signless(1)],
                                has_else=True)
                with ir.InsertionPoint(read.then_block):
                    flag = memref.load(flags_smem, [lane])
                    scf.YieldOp([packing.unpack(memref.load(values_smem, [lane])),
                                 arith.cmpi(arith.CmpIPredicate.ne, flag,
                                            arith.constant(i32, 0))])
                with ir.InsertionPoint(read.else_block):
                    scf.YieldOp([packing.zero(), arith.constant(ir.IntegerType.get_signless(1), 0)])
                total, total_valid = _warp_reduce(read.results[0], read.results[1], packing,
                                                  combine, WARP)
                _write(plan, maps, operands, outer, leader, total, total_valid, combine)
                scf.YieldOp([])
        else:
            _write(plan, maps, operands, outer, leader, partial, valid, combine)


def _write(plan, maps, operands, outer, lane0, value, valid, combine) -> None:
    """Lane 0: output element = combine(value, output element), if value holds elements."""
    write = scf.IfOp(arith.andi(lane0, valid))
    with ir.InsertionPoint(write.then_block):
        place = indices_of(maps[-1], outer + [c(0)])
        old = memref.load(operands[-1], place)
        memref.store(combine(value, old), operands[-1], place)
        scf.YieldOp([])


def _warp_reduce(value, valid, packing: Packing, combine, segment: int):
    """2. the partials of each `segment` lanes (aligned) combined by butterfly shuffles:
    afterwards every lane holds the combination of its segment's partials that hold
    elements (`valid`). The whole warp takes part in every shuffle."""
    i32 = ir.IntegerType.get_signless(32)
    width = arith.constant(i32, WARP)
    offset = segment // 2
    while offset:
        delta = arith.constant(i32, offset)
        other = gpu.ShuffleOp(packing.pack(value), delta, width, gpu.ShuffleMode.XOR).results[0]
        other_flag = gpu.ShuffleOp(arith.extui(i32, valid), delta, width,
                                   gpu.ShuffleMode.XOR).results[0]
        other = packing.unpack(other)
        other_valid = arith.cmpi(arith.CmpIPredicate.ne, other_flag, arith.constant(i32, 0))
        both = arith.andi(valid, other_valid)
        value = arith.select(both, combine(other, value),
                             arith.select(valid, value, other))
        valid = arith.ori(valid, other_valid)
        offset //= 2
    return value, valid
