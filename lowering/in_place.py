"""kiln-update-carried-in-place: a loop's carried tensors stay in one buffer (after fusion).

Upstream writes every elementwise result into a fresh `tensor.empty`, so a loop body such as
`x = x * 0.999 + 1` produces its new `x` in a new tensor. Bufferized, that is a buffer
allocated every iteration, and for `scf.while` a copy of every carried buffer at each
`scf.condition` as well: bufferization copies there unless what the body yields is the very
buffer it received.

Where a loop yields, in the place of a carried value, the result of an elementwise
`linalg.generic` that writes a fresh tensor.empty (possibly reshaped on the way, as JAX's
scans do: [16] -> [1, 16] -> [16]), and nothing reads the carried value after that generic
(it may read it itself, at the element it writes), the generic writes into the carried value
instead. Bufferization then updates one buffer for the whole loop. A pure reader that comes
after the generic but needs nothing the generic computes (`ys[i] = 2 * c` beside
`c = 0.9 * c + x[i]`) is moved ahead of it first.

Likewise a generic whose result the loop inserts into a carried value (`ys[i] = ...` in a
scan) writes into that slice of it directly (upstream's empty-tensor elimination does this
too, but over the whole module, where it can make two returned results one buffer).

Runs after elementwise fusion, which would otherwise put the tensor.empty back (its
outs-dependency cleanup); the fused generic reads and writes the carried buffer element by
element. Bufferization still checks every in-place write, so a case this pass misjudges
costs a copy, never a wrong result.
"""
from __future__ import annotations

from torch_mlir import ir
from torch_mlir.dialects import tensor

from .ir_util import walk

_RESHAPES = ("tensor.expand_shape", "tensor.collapse_shape")
# Ops that read a tensor without aliasing it (a linalg op's results alias its outputs only,
# so a linalg op reading the carried value as an input also counts).
_READERS = ("tensor.extract", "tensor.dim")


def update_carried_in_place(module: ir.Module) -> None:
    for loop in [o for o in walk(module.operation) if o.name in ("scf.for", "scf.while")]:
        carried = _carried(loop)
        if carried is None:
            continue
        arguments, yield_op = carried
        for argument, value in zip(arguments, list(yield_op.operands)):
            if sum(1 for v in yield_op.operands if v == value) == 1 and \
                    argument.type == value.type:
                if not _write_slice_in_place(argument, value, yield_op.block):
                    _write_in_place(argument, value, yield_op.block)


def _carried(loop: ir.Operation) -> tuple[list[ir.Value], ir.Operation] | None:
    """The loop body's carried values and its scf.yield, position for position."""
    if loop.name == "scf.for":
        body = loop.regions[0].blocks[0]
        return list(body.arguments)[1:], _terminator(body)
    before, after = loop.regions[0].blocks[0], loop.regions[1].blocks[0]
    # Kiln's whiles forward their "before" arguments unchanged, so argument i of the body
    # and operand i of its yield are one carried value; other whiles are left alone.
    if list(_terminator(before).operands)[1:] != list(before.arguments):
        return None
    return list(after.arguments), _terminator(after)


def _terminator(block: ir.Block) -> ir.Operation:
    return block.operations[len(block.operations) - 1].operation


def _defining_op(value: ir.Value) -> ir.Operation | None:
    return value.owner.operation if isinstance(value, ir.OpResult) else None


def _write_in_place(argument: ir.Value, value: ir.Value, block: ir.Block) -> None:
    # Walk back from the yielded value through reshapes to the generic that computes it.
    reshapes = []
    producer = _defining_op(value)
    while producer is not None and producer.name in _RESHAPES and \
            len(list(producer.results[0].uses)) == 1:
        reshapes.append(producer)
        producer = _defining_op(producer.operands[0])
    if producer is None or producer.name != "linalg.generic" or producer.block != block:
        return
    generic = producer
    result = (reshapes[-1].operands[0] if reshapes else value)
    if not _writes_fresh_elementwise(generic, result):
        return
    # The destination: the carried value seen as the generic's result, i.e. the yield's
    # reshapes undone, in reverse order.
    view_of_result = [_inverse(r) for r in reshapes]
    views = _readers_come_first(argument, generic, result, view_of_result)
    if views is None:
        return
    # The generic must write through the view it reads the argument by, if it reads it:
    # two views of one buffer would look like two buffers to bufferization (a copy).
    path = [make.signature for make in view_of_result]
    destination = next((v for v, p in views if p == path), None)
    if destination is None:
        destination = argument
        with ir.InsertionPoint(generic), generic.location:
            for make in view_of_result:
                destination = make(destination)
    n_in = len(generic.operands) - len(generic.results)
    generic.operands[n_in + ir.OpResult(result).result_number] = destination


def _write_slice_in_place(argument: ir.Value, value: ir.Value, block: ir.Block) -> bool:
    """`carried[offsets] = generic(...)` (a tensor.insert_slice of a fresh generic result into
    the carried value, as a scan's stacked outputs are written): the generic writes straight
    into that slice of the carried value. Only where nothing else uses the carried value
    after the generic (the insert_slice then copies nothing)."""
    insert = _defining_op(value)
    if insert is None or insert.name != "tensor.insert_slice" or insert.block != block or \
            insert.operands[1] != argument:
        return False
    source = insert.operands[0]
    generic = _defining_op(source)
    if generic is None or generic.name != "linalg.generic" or generic.block != block or \
            len(list(source.uses)) != 1 or not _writes_fresh_elementwise(generic, source):
        return False
    positions = list(insert.operands)[2:]
    if any(not _available_at(v, generic) for v in positions):
        return False
    for use in argument.uses:
        user = use.owner.operation
        if user != insert and (user.block != block or not user.is_before_in_block(generic)
                               or not _only_reads(user, use.operand_number)):
            return False
    segments = list(ir.DenseI32ArrayAttr(insert.attributes["operandSegmentSizes"]))
    with ir.InsertionPoint(generic), generic.location:
        window = ir.Operation.create(
            "tensor.extract_slice", results=[source.type], operands=[argument, *positions],
            attributes={"operandSegmentSizes": ir.DenseI32ArrayAttr.get([1, *segments[2:]]),
                        **{name: insert.attributes[name] for name in
                           ("static_offsets", "static_sizes", "static_strides")}}).result
    n_in = len(generic.operands) - len(generic.results)
    generic.operands[n_in + ir.OpResult(source).result_number] = window
    return True


def _available_at(value: ir.Value, op: ir.Operation) -> bool:
    """Whether `value` is defined ahead of `op` (in its block or around it)."""
    definer = _defining_op(value)
    if definer is None:
        return _encloses(ir.BlockArgument(value).owner, op)
    if definer.block == op.block:
        return definer.is_before_in_block(op)
    return True  # defined in an enclosing block, the only other place `op`'s block sees


def _writes_fresh_elementwise(generic: ir.Operation, result: ir.Value) -> bool:
    """An all-parallel generic whose output for `result` is a tensor.empty it never reads."""
    if any("reduction" in str(it) for it in ir.ArrayAttr(generic.attributes["iterator_types"])):
        return False
    n_in = len(generic.operands) - len(generic.results)
    out = n_in + ir.OpResult(result).result_number
    init = _defining_op(generic.operands[out])
    if init is None or init.name != "tensor.empty":
        return False
    return not list(generic.regions[0].blocks[0].arguments[out].uses)


def _signature(op: ir.Operation) -> tuple[str, str, str]:
    return op.name, str(op.attributes["reassociation"]), str(op.results[0].type)


def _inverse(reshape: ir.Operation):
    """A builder of the reshape that undoes `reshape` (source type back from result type),
    with its signature, for comparison with reshapes the body already has."""
    source = ir.RankedTensorType(reshape.operands[0].type)
    reassociation = reshape.attributes["reassociation"]
    if reshape.name == "tensor.collapse_shape":
        def make(value):
            return tensor.ExpandShapeOp(source, value, reassociation, [],
                                        list(source.shape)).result
        make.signature = ("tensor.expand_shape", str(reassociation), str(source))
    else:
        def make(value):
            return tensor.CollapseShapeOp(source, value, reassociation).result
        make.signature = ("tensor.collapse_shape", str(reassociation), str(source))
    return make


def _readers_come_first(argument: ir.Value, generic: ir.Operation, result: ir.Value,
                        view_of_result: list) -> list[tuple[ir.Value, list]] | None:
    """Whether every read of `argument` (directly or through reshapes of it) can happen
    before `generic` overwrites it: readers already before it, readers after it moved ahead
    when they need nothing computed after it, and the generic itself reading the element it
    writes (through the very view it writes). Returns `argument` and its reshapes, each with
    the signatures of the reshapes that lead to it from `argument`, or None."""
    n_in = len(generic.operands) - len(generic.results)
    out = n_in + ir.OpResult(result).result_number
    maps = [str(m) for m in ir.ArrayAttr(generic.attributes["indexing_maps"])]
    destination_path = [make.signature for make in view_of_result]
    # (alias, the reshapes from `argument` to it)
    aliases: list[tuple[ir.Value, list]] = [(argument, [])]
    seen: list[tuple[ir.Value, list]] = []
    moves: list[ir.Operation] = []
    while aliases:
        alias, path = aliases.pop()
        seen.append((alias, path))
        for use in alias.uses:
            user = use.owner.operation
            if user == generic:
                if use.operand_number >= n_in or maps[use.operand_number] != maps[out] or \
                        path != destination_path:
                    return None
                continue
            if user.block != generic.block:
                return None
            if user.name in _RESHAPES:
                aliases.append((user.results[0], path + [_signature(user)]))
            elif not _only_reads(user, use.operand_number):
                return None
            if not user.is_before_in_block(generic):
                if not _movable_before(user, generic, moves):
                    return None
                moves.append(user)
    for user in _in_block_order(moves):
        user.move_before(generic)
    return seen


def _only_reads(user: ir.Operation, operand_number: int) -> bool:
    if user.name in _READERS:
        return True
    n_out = len(user.results)
    return user.name.startswith("linalg.") and n_out > 0 and \
        operand_number < len(user.operands) - n_out


def _movable_before(user: ir.Operation, generic: ir.Operation,
                    moving: list[ir.Operation]) -> bool:
    """A pure reader after `generic` may go ahead of it when each of its operands is
    available there already (defined before it, outside its block, or moved with it)."""
    if user.regions and user.name != "linalg.generic":
        return False
    for operand in user.operands:
        op = _defining_op(operand)
        if op is None or op.block != generic.block:
            if op is None and ir.BlockArgument(operand).owner != generic.block and \
                    not _encloses(ir.BlockArgument(operand).owner, generic):
                return False
            continue
        if op == generic or not (op.is_before_in_block(generic) or op in moving):
            return False
    return True


def _encloses(block: ir.Block, op: ir.Operation) -> bool:
    parent = op
    while parent is not None:
        if parent.block == block:
            return True
        parent = parent.parent
    return False


def _in_block_order(ops: list[ir.Operation]) -> list[ir.Operation]:
    ordered = []
    for op in ops:
        i = 0
        while i < len(ordered) and ordered[i].is_before_in_block(op):
            i += 1
        ordered.insert(i, op)
    return ordered
