"""kiln-skip-empty-iterations: a loop nest over a run-time shape with no elements runs no loop.

A linalg op over buffers of run-time shape [a, 0] lowers to `for i < a: for j < 0: ...`:
the body never runs, yet the outer loop still counts to a, which for a = 2^62 never ends
(fuzz finding F5: a dynamic_iota of shape [2^31 - 1, 0] took 71 s). Before the loop passes
run, this pass puts each such op under `scf.if` on its iteration space being non-empty, so
a zero-element value costs a few compares whatever its other dimensions are.

The test is exact: in the ops below every operand is indexed by loop dimensions alone
(projected-permutation indexing maps), so an operand dimension of size 0 is a loop of 0
trips and the op's body runs for no point at all. Operands indexed otherwise (a
convolution's input, a generic's constant index) are not used for the test; ops not in the
allowlist are left alone.

Only ops with a run-time dimension are touched: a static program is left exactly as it was.
"""
from __future__ import annotations

from torch_mlir import ir
from torch_mlir.dialects import arith, memref, scf

from ..ir_util import walk

# Named linalg ops whose every operand is indexed by loop dimensions alone.
_NAMED = frozenset({"linalg.fill", "linalg.copy", "linalg.map", "linalg.reduce",
                    "linalg.transpose", "linalg.broadcast", "linalg.matmul",
                    "linalg.batch_matmul", "linalg.matvec", "linalg.vecmat", "linalg.dot",
                    "linalg.batch_matvec", "linalg.batch_vecmat"})
_NE = 1  # arith.cmpi predicate


def skip_empty_iterations(module: ir.Module) -> None:
    targets = []
    for op in walk(module.operation):
        sizes = _checked_operands(op)
        if sizes and any(_has_dynamic_dim(v) for v in sizes):
            targets.append((op, sizes))
    for op, operands in targets:
        _guard(op, operands)


def _checked_operands(op: ir.Operation) -> list[ir.Value]:
    """The memref operands whose sizes are loop trip counts of `op` (empty: not handled)."""
    if len(op.results):
        return []   # tensor form: only bufferized ops are rewritten
    if op.name == "memref.copy":
        return [op.operands[0]]
    if op.name == "linalg.generic":
        maps = [ir.AffineMapAttr(m).value for m in ir.ArrayAttr(op.attributes["indexing_maps"])]
        return [v for v, m in zip(op.operands, maps)
                if isinstance(v.type, ir.MemRefType) and m.is_projected_permutation]
    if op.name in _NAMED:
        return [v for v in op.operands if isinstance(v.type, ir.MemRefType)]
    return []


def _has_dynamic_dim(value: ir.Value) -> bool:
    return any(ir.ShapedType.is_dynamic_size(n) for n in ir.MemRefType(value.type).shape)


def _guard(op: ir.Operation, operands: list[ir.Value]) -> None:
    """Move `op` into `scf.if (every dimension of operands != 0)`; drop it when a static
    dimension is already 0 (its other, run-time, dimensions would still be looped over)."""
    if any(n == 0 for v in operands for n in ir.MemRefType(v.type).shape):
        op.erase()
        return
    with ir.InsertionPoint(op), op.location:
        index = ir.IndexType.get()
        zero = arith.ConstantOp(index, 0).result
        nonempty = None
        for value in operands:
            for d, n in enumerate(ir.MemRefType(value.type).shape):
                if not ir.ShapedType.is_dynamic_size(n):
                    continue   # static and not 0: no test
                size = memref.DimOp(value, arith.ConstantOp(index, d).result).result
                test = arith.cmpi(_NE, size, zero)
                nonempty = test if nonempty is None else arith.andi(nonempty, test)
        branch = scf.IfOp(nonempty)
        with ir.InsertionPoint(branch.then_block):
            scf.YieldOp([])
    op.move_before(branch.then_block.operations[0])
