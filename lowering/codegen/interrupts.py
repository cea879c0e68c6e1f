"""kiln-interrupt-checks: let Ctrl-C stop a running program.

Compiled code runs inside one C call, so Python's SIGINT handling cannot reach it until it
returns; a `while (true)` would never stop. This pass makes loops poll Kiln's runtime
(`kiln_check_interrupt`, runtime/kiln_runtime.c), which jumps back out of the program after
SIGINT, freeing its temporaries; the call then raises KeyboardInterrupt.

Polls go where they cost nothing measurable and bound the wait: at the top of every
`scf.while` body (the only loops whose trip count the program decides), and of every
`scf.for` that has another loop inside it. Innermost `scf.for` loops get none, so that LLVM
still vectorizes them; one pass over an innermost loop is short.
"""
from __future__ import annotations

from torch_mlir import ir
from torch_mlir.dialects import func

from ..ir_util import walk

CHECK_SYMBOL = "kiln_check_interrupt"


def insert_interrupt_checks(module: ir.Module) -> None:
    bodies = []
    for op in walk(module.operation):
        if op.name == "scf.while":
            bodies.append(op.regions[1].blocks[0])
        elif op.name == "scf.for" and any(inner.name in ("scf.for", "scf.while")
                                          for inner in walk(op)):
            bodies.append(op.regions[0].blocks[0])
    if not bodies:
        return
    _declare(module)
    for block in bodies:
        first = block.operations[0]
        with ir.InsertionPoint(first), first.location:
            func.CallOp([], ir.FlatSymbolRefAttr.get(CHECK_SYMBOL), [])


def _declare(module: ir.Module) -> None:
    for op in module.body.operations:
        if op.operation.name == "func.func" and \
                ir.StringAttr(op.operation.attributes["sym_name"]).value == CHECK_SYMBOL:
            return
    with ir.InsertionPoint.at_block_begin(module.body), ir.Location.unknown():
        func.FuncOp(CHECK_SYMBOL, ir.FunctionType.get([], []), visibility="private")
