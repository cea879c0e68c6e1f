"""Host control flow on the GPU (`kiln-gpu-serial-kernels`): what runs before
`scf-parallel-loop-tiling` maps the remaining parallel loops to kernels.

A `stablehlo.while`/`case`/`if` becomes `scf.while`/`scf.index_switch`/`scf.if` (and counted
loops `scf.for`) whose regions hold parallel loops, allocations and copies: kernel work on
device buffers, steered by a predicate, a branch index or loop-carried scalars. Such an op
stays in the host function, and the execution plan (host.py) runs it: XLA's while and
conditional thunks do the same, reading the predicate back from the device each time.

This pass decides which ops those are, and applies the serial-kernel rule (every
run of buffer work outside a parallel loop becomes a one-thread kernel) to the entry block
and to each block of those ops alike. A scalar the host needs (a predicate, a switch index,
a loop bound or a loop-carried scalar) that the program reads from a buffer with
`memref.load` stays a host load, marked `kiln.gpu.download`: the plan copies those bytes
to the host. Scalar arithmetic the host needs stays on the host (the plan evaluates it).
"""
from __future__ import annotations

from torch_mlir import ir
from torch_mlir.dialects import memref

from . import loops
from .custom_calls import is_plan_call

HOST_CONTROL = frozenset({"scf.while", "scf.if", "scf.index_switch", "scf.for"})
DOWNLOAD_ATTR = "kiln.gpu.download"
_TERMINATORS = frozenset({"scf.yield", "scf.condition", "func.return"})
# Ops inside a control-flow op that make it host control flow: kernels-to-be and buffers.
_DEVICE_WORK = frozenset({"scf.parallel", "memref.alloc", "memref.copy", "memref.get_global"})


def host_control_flow(module: ir.Module) -> None:
    for func in module.body.operations:
        func = func.operation
        if func.name == "func.func" and func.regions[0].blocks and _bufferized(func):
            needed: set = set()   # ops whose scalar results the host needs
            for block in func.regions[0].blocks:
                _host_block(block, needed)


def _bufferized(func: ir.Operation) -> bool:
    """Whether no value in `func` is a tensor. The rule is about buffer work: a function still
    on tensors (before bufferization, where the GPU pipeline does not run this pass) has none
    yet, and is left as it is."""
    if any(_is_tensor(t) for t in ir.FunctionType(ir.TypeAttr(
            func.attributes["function_type"]).value).inputs):
        return False
    found = []

    def visit(op):
        if any(_is_tensor(r.type) for r in op.operation.results):
            found.append(op)
            return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE
    func.walk(visit)
    return not found


def is_host_control(op: ir.Operation) -> bool:
    """A control-flow op the host runs: it carries buffers or its regions hold device work
    (a serial loop of loads and stores is a one-thread kernel instead)."""
    if op.name not in HOST_CONTROL:
        return False
    if any(_is_memref(v.type) for v in [*op.operands, *op.results]):
        return True
    found = []

    def visit(inner):
        if inner.operation.name in _DEVICE_WORK or is_plan_call(inner.operation):
            found.append(inner)
            return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE
    op.walk(visit)
    return bool(found)


def _host_block(block: ir.Block, needed: set) -> None:
    for op in block.operations:
        op = op.operation
        if is_host_control(op):
            for value in _host_scalars(op):
                _mark(value, needed)
            for region in op.regions:
                for inner in region.blocks:
                    _host_block(inner, needed)
    _spill_between_kernels(block, needed)
    for run in _runs(block, needed):
        loops.wrap_serial(run)


def _spill_between_kernels(block: ir.Block, needed: set) -> None:
    """A scalar one run computes and a later kernel reads (a value loaded, then stored
    after a parallel loop) crosses kernels through a 0-d device buffer: stored where it is
    computed, loaded where it is used."""
    runs = _runs(block, needed)
    later = {op for run in runs for op in run}
    for run in runs:
        for op in run:
            for result in op.results:
                uses = [use.owner for use in result.uses if not loops.nested_in(use.owner, run)
                        and _is_kernel_work(_in_block(use.owner, block), later)]
                if not uses or _is_memref(result.type):
                    continue
                with ir.InsertionPoint(run[0]), op.location:
                    buffer = memref.alloc(ir.MemRefType.get([], result.type), [], [])
                with ir.InsertionPoint.after(op), op.location:
                    memref.store(result, buffer, [])
                for user in uses:
                    user = user.operation if hasattr(user, "operation") else user
                    with ir.InsertionPoint(user), op.location:
                        loaded = memref.load(buffer, [])
                    user.replace_uses_of_with(result, loaded)


def _in_block(owner, block: ir.Block) -> ir.Operation | None:
    """The op of `block` holding `owner` (None: `owner` is elsewhere)."""
    op = owner.operation if hasattr(owner, "operation") else owner
    while op is not None:
        if op.block == block:
            return op
        op = op.parent.operation if op.parent is not None else None
    return None


def _is_kernel_work(op: ir.Operation | None, runs: set) -> bool:
    return op is not None and (op in runs or op.name == "scf.parallel")


def _host_scalars(op: ir.Operation) -> list[ir.Value]:
    """The scalar operands of a host control-flow op and of its regions' terminators."""
    values = list(op.operands)
    for region in op.regions:
        for block in region.blocks:
            terminator = block.operations[len(block.operations) - 1].operation
            if terminator.name in ("scf.yield", "scf.condition"):
                values.extend(terminator.operands)
    return [v for v in values if not _is_memref(v.type)]


def _mark(value: ir.Value, needed: set) -> None:
    """Keep on the host the ops computing `value`: scalar arithmetic, and loads (downloads)."""
    pending = [value]
    while pending:
        owner = pending.pop().owner
        if isinstance(owner, ir.Block):
            continue   # a block argument: bound by the plan
        op = owner.operation
        if op in needed:
            continue
        if op.name == "memref.load":
            op.attributes[DOWNLOAD_ATTR] = ir.UnitAttr.get()
            needed.add(op)
            pending.extend(op.operands[1:])   # the indices
        elif loops.pure_scalar(op) or op.name == "arith.constant":
            needed.add(op)
            pending.extend(op.operands)


def _runs(block: ir.Block, needed: set) -> list[list[ir.Operation]]:
    """Maximal runs of buffer work (scalar arithmetic between them joins the run), with host
    control flow, downloads and the scalars the host needs as further host ops."""
    runs, current = [], []
    for op in block.operations:
        op = op.operation
        host = (op.name in loops.HOST_OPS or op.name.startswith("gpu.") or op in needed
                or op.name in _TERMINATORS or is_host_control(op) or is_plan_call(op))
        if loops.pure_scalar(op) and not host:
            if current:
                current.append(op)
        elif host:
            if current:
                runs.append(current)
                current = []
        else:
            current.append(op)
    if current:
        runs.append(current)
    return [run for run in map(_trim, runs) if run]


def _trim(run: list[ir.Operation]) -> list[ir.Operation]:
    """The run without its trailing scalar arithmetic, except what depends on the run's
    work: the host cannot compute that (spilled to a later kernel if one reads it)."""
    inside = set(run)
    while run and loops.pure_scalar(run[-1]) and not any(
            not isinstance(v.owner, ir.Block) and v.owner.operation in inside
            for v in run[-1].operands):
        inside.discard(run.pop())
    return run


def _is_tensor(t: ir.Type) -> bool:
    for tensor_type in (ir.RankedTensorType, ir.UnrankedTensorType):
        try:
            tensor_type(t)
        except ValueError:
            continue
        return True
    return False


def _is_memref(t: ir.Type) -> bool:
    try:
        ir.MemRefType(t)
    except ValueError:
        return False
    return True
