"""Loads of read-only buffers hoisted out of the loops they do not vary in.

A gather copies a row of the table per index: `out[i, j] = table[clamp(idx[i]), j]`. After
convert-linalg-to-loops the index load sits in the inner loop over j; LLVM cannot hoist it
(the store to `out` might overwrite `idx`, as far as it knows) and so the row copy runs
element by element, reloading and re-clamping the index each time. kiln-parallelize knows
better: the memrefs a body only loads from are distinct from every buffer the op writes
(it checks their roots), and it marks those loads `kiln.read_only`. This pass moves each
marked load whose indices are defined outside its loop before the loop (with upstream
loop-invariant-code-motion for the pure index arithmetic around it); the inner loop is then
a plain row copy LLVM vectorizes.

Only loads directly in an `scf.for` body with constant, non-empty bounds move: a load under
an `scf.if` (a concatenation's pieces) may be out of bounds on the branch not taken, and a
loop that may run zero times must not load at all.
"""
from __future__ import annotations

from torch_mlir import ir, passmanager

from ..ir_util import constant_int

MARK = "kiln.read_only"


def _defined_outside(v: ir.Value, loop: ir.Operation) -> bool:
    owner = v.owner
    op = owner.owner if isinstance(owner, ir.Block) else owner.operation
    while op is not None:
        if op == loop:
            return False
        op = op.parent
    return True


def _hoist_marked(module: ir.Module) -> bool:
    moved = []

    def visit(op):
        op = op.operation
        if op.name != "memref.load" or MARK not in op.attributes:
            return ir.WalkResult.ADVANCE
        loop = op.parent
        if loop is None or loop.name != "scf.for":
            return ir.WalkResult.ADVANCE
        lower, upper = constant_int(loop.operands[0]), constant_int(loop.operands[1])
        if lower is None or upper is None or upper <= lower:
            return ir.WalkResult.ADVANCE
        if all(_defined_outside(v, loop) for v in op.operands):
            moved.append((op, loop))
        return ir.WalkResult.ADVANCE
    module.operation.walk(visit)
    for op, loop in moved:
        op.move_before(loop)
    return bool(moved)


def _licm(module: ir.Module) -> None:
    passmanager.PassManager.parse("builtin.module(func.func(loop-invariant-code-motion))") \
        .run(module.operation)


def hoist_invariant_loads(module: ir.Module) -> None:
    marked = []

    def find(op):
        if MARK in op.operation.attributes:
            marked.append(op)
            return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE
    module.operation.walk(find)
    if not marked:
        return   # nothing to hoist: leave every other program's loops as they were
    _licm(module)
    for _ in range(8):   # one loop level per round, outward
        if not _hoist_marked(module):
            break
        _licm(module)

    def unmark(op):
        if MARK in op.operation.attributes:
            del op.operation.attributes[MARK]
        return ir.WalkResult.ADVANCE
    module.operation.walk(unmark)
