"""kiln-interrupt-checks: let Ctrl-C stop a running program.

Compiled code runs inside one C call, so Python's SIGINT handling cannot reach it until it
returns; a `while (true)` would never stop. This pass makes loops poll Kiln's runtime
(`kiln_check_interrupt`, runtime/kiln_runtime.c), which jumps back out of the program after
SIGINT, freeing its temporaries; the call then raises KeyboardInterrupt.

Polls go where they cost nothing measurable and bound the wait: at the top of every
`scf.while` body (the only loops whose trip count the program decides), and of every
`scf.for` that has another loop inside it and enough work in one iteration: at least
MIN_POLLED_WORK iterations of innermost loops (a trip count only known at run time counts as
plenty). Innermost `scf.for` loops get none, so that LLVM still vectorizes them; one pass over
an innermost loop is short. A loop whose iteration is a few short inner loops gets none
either (a grouped convolution's loop over groups, each a vector of 8 channels: the call took
as long as the work), and the loop around it polls. Loops of one iteration (linalg's loops
over unit dimensions) count as none: the loops around them poll.

A while loop whose body is a few scalar instructions (a `fori_loop` of tiny steps) would
spend a good part of each iteration in the call, so it polls every POLL_EVERY iterations
instead, counting them in a stack slot that LLVM keeps in a register. A tiny body has no
loop, call or copy inside it, so POLL_EVERY of them still take microseconds.
"""
from __future__ import annotations

from torch_mlir import ir
from torch_mlir.dialects import arith, func, memref, scf

from ..ir_util import constant_int, walk

CHECK_SYMBOL = "kiln_check_interrupt"
POLL_EVERY = 1024  # a power of two: the test is a mask
MIN_POLLED_WORK = 256  # innermost iterations in one iteration of a loop that polls
_UNKNOWN_TRIPS = 1 << 20  # a trip count known only at run time

_LOOPS = ("scf.for", "scf.while", "scf.parallel", "scf.forall")
# What makes an iteration long (or unbounded): loops, calls, copies of whole buffers.
_NOT_TINY = _LOOPS + ("func.call", "func.call_indirect", "llvm.call", "memref.copy",
                      "memref.alloc", "memref.alloca")
_EQ = 0  # arith.cmpi predicate


def insert_interrupt_checks(module: ir.Module) -> None:
    every_iteration, amortized = [], []
    for op in walk(module.operation):
        if op.name == "scf.while":
            body = op.regions[1].blocks[0]
            if any(inner.name in _NOT_TINY or inner.name.startswith("linalg.")
                   for inner in walk(op)):
                every_iteration.append(body)
            else:
                amortized.append((op, body))
        elif op.name == "scf.for" and not _runs_once(op) and \
                any(inner.name in _LOOPS and not _runs_once(inner) for inner in walk(op)) and \
                _work(op.regions[0].blocks[0]) >= MIN_POLLED_WORK:
            every_iteration.append(op.regions[0].blocks[0])
    if not every_iteration and not amortized:
        return
    _declare(module)
    for block in every_iteration:
        first = block.operations[0]
        with ir.InsertionPoint(first), first.location:
            _call_check()
    for loop, block in amortized:
        _poll_every(loop, block)


def _trips(loop: ir.Operation) -> int:
    if loop.name != "scf.for":
        return _UNKNOWN_TRIPS
    low, high, step = (constant_int(v) for v in list(loop.operands)[:3])
    if None in (low, high, step) or step <= 0:
        return _UNKNOWN_TRIPS
    return max(0, -(-(high - low) // step))


def _work(block: ir.Block) -> int:
    """Innermost-loop iterations one pass through `block` runs (at least 1), capped."""
    total = 0
    for op in block.operations:
        op = op.operation
        if op.name in _LOOPS:
            inner = max((_work(b) for r in op.regions for b in r.blocks), default=1)
            total += _trips(op) * inner
        elif len(op.regions):   # scf.if, index_switch: the longest way through
            total += max((_work(b) for r in op.regions for b in r.blocks), default=0)
        if total >= _UNKNOWN_TRIPS:
            return _UNKNOWN_TRIPS
    return max(total, 1)


def _runs_once(loop: ir.Operation) -> bool:
    """An scf.for of one iteration (linalg's loop over a unit dimension): the loops around
    and inside it poll."""
    if loop.name != "scf.for":
        return False
    bounds = [constant_int(v) for v in list(loop.operands)[:3]]
    return None not in bounds and bounds[0] < bounds[1] <= bounds[0] + bounds[2]




def _call_check() -> None:
    func.CallOp([], ir.FlatSymbolRefAttr.get(CHECK_SYMBOL), [])


def _poll_every(loop: ir.Operation, body: ir.Block) -> None:
    """Count the loop's iterations in a stack slot of its function and poll on every
    POLL_EVERY-th."""
    i32 = ir.IntegerType.get_signless(32)
    function = _enclosing_function(loop)
    entry = function.regions[0].blocks[0]
    with ir.InsertionPoint(entry.operations[0]), loop.location:
        counter = memref.AllocaOp(ir.MemRefType.get([], i32), [], []).result
    with ir.InsertionPoint(loop), loop.location:
        memref.store(arith.ConstantOp(i32, 0).result, counter, [])
    first = body.operations[0]
    with ir.InsertionPoint(first), first.location:
        count = arith.addi(memref.load(counter, []), arith.ConstantOp(i32, 1).result)
        memref.store(count, counter, [])
        lap = arith.andi(count, arith.ConstantOp(i32, POLL_EVERY - 1).result)
        due = arith.cmpi(_EQ, lap, arith.ConstantOp(i32, 0).result)
        poll = scf.IfOp(due)
        with ir.InsertionPoint(poll.then_block):
            _call_check()
            scf.YieldOp([])


def _enclosing_function(op: ir.Operation) -> ir.Operation:
    while op.name not in ("func.func", "llvm.func"):
        op = op.parent
    return op


def _declare(module: ir.Module) -> None:
    for op in module.body.operations:
        if op.operation.name == "func.func" and \
                ir.StringAttr(op.operation.attributes["sym_name"]).value == CHECK_SYMBOL:
            return
    with ir.InsertionPoint.at_block_begin(module.body), ir.Location.unknown():
        func.FuncOp(CHECK_SYMBOL, ir.FunctionType.get([], []), visibility="private")
