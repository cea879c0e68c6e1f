"""kiln-loop-hints: tell LLVM not to unroll loops that have long loops inside them.

LLVM's unroller fully unrolls any loop whose trip count is a small constant, outer loops
included: linalg's loop over the 8 rows of a kiln-fuse-rows block became 8 copies of the
vectorized (and interleaved) loop over each row's 512 columns, for every op of the block.
The copies save one compare-and-branch per long inner loop, too little to measure, and cost
LLVM most of its time on such programs (attention: kiln_rows_body grew from 345 to 2356
instructions at O2, and LLVM's loop passes and instruction selection ran over all of them).

So an `scf.for` that has a long loop inside it (one whose trip count is not a constant, or a
constant of at least LONG_TRIPS) gets `llvm.loop_annotation<unroll = <disable = true>>`,
which convert-scf-to-cf puts on the loop's back edge. Loops with only short constant loops
inside (a 3x3 window) are left to LLVM, which unrolls the inner ones and then may unroll or
vectorize the outer one; innermost loops are always left alone.
"""
from __future__ import annotations

from torch_mlir import ir

from ..ir_util import constant_int

ANNOTATION = "loop_annotation"   # llvm.br's own attribute: cf-to-llvm copies it there
LONG_TRIPS = 16   # a loop this long vectorizes on its own: copies of it buy nothing
_LOOPS = ("scf.for", "scf.while")


def annotate_loops(module: ir.Module) -> None:
    hint = ir.Attribute.parse("#llvm.loop_annotation<unroll = <disable = true>>")
    long_loops = []

    def visit(op):
        op = op.operation
        if op.name in _LOOPS and _is_long(op):
            long_loops.append(op)
        return ir.WalkResult.ADVANCE
    module.operation.walk(visit)
    for loop in long_loops:
        outer = loop.parent
        while outer is not None and outer.name not in ("func.func", "builtin.module"):
            if outer.name == "scf.for":
                if ANNOTATION in outer.attributes:
                    break   # it and the loops around it are marked already
                outer.attributes[ANNOTATION] = hint
            outer = outer.parent


def _is_long(loop: ir.Operation) -> bool:
    if loop.name != "scf.for":
        return True   # a while loop's trip count is the program's business
    lower, upper, step = (constant_int(v) for v in list(loop.operands)[:3])
    if None in (lower, upper, step) or step <= 0:
        return True
    return (upper - lower + step - 1) // step >= LONG_TRIPS


