"""kiln-fold-identity-ops: StableHLO shape and type ops that change nothing -> their operand.

Upstream's stablehlo-legalize-to-linalg crashes (SIGSEGV, sometimes SIGABRT) on a
`reshape tensor<ui32> -> tensor<ui32>`: a 0-d identity reshape of any unsigned type (fuzz
finding F4; other ranks, signed types and the other identity forms below lower fine today).
Kiln's optimize stage leaves such no-ops in place, so they are folded here, before upstream
sees them. The fold is exact: each op below returns its operand unchanged when its result
type equals its operand type and (for transpose and broadcast_in_dim) its dimension map is
the identity. Allowlist: ops not named here are left alone.

Windows as large as their operand are identities too (the start indices are clamped so that
the window fits, so they are all 0): a `dynamic_slice` whose result has its operand's type
is the operand, and a `dynamic_update_slice` whose update has the operand's type is the
update. Upstream crashes (SIGSEGV) on the 0-d `dynamic_slice` that JAX's shard_map emits for
a scalar (`dynamic_slice %x, sizes = []`).
"""
from __future__ import annotations

from torch_mlir import ir

from .ir_util import walk
from .patterns import replace_op

# Op -> the attribute holding its dimension map (None: the types alone decide).
IDENTITY_FOLDABLE = {
    "stablehlo.reshape": None,
    "stablehlo.convert": None,
    "stablehlo.bitcast_convert": None,
    "stablehlo.transpose": "permutation",
    "stablehlo.broadcast_in_dim": "broadcast_dimensions",
}


# Window ops -> the operand that is the result when the window is everything.
WHOLE_WINDOW = {"stablehlo.dynamic_slice": 0, "stablehlo.dynamic_update_slice": 1}


def fold_identity_ops(module: ir.Module) -> None:
    with module.context:
        for op in list(walk(module.operation)):
            if op.name in IDENTITY_FOLDABLE and _is_identity(op):
                replace_op(op, [op.operands[0]])
            elif op.name in WHOLE_WINDOW and len(op.results) == 1 and \
                    op.operands[0].type == op.results[0].type and \
                    op.operands[WHOLE_WINDOW[op.name]].type == op.results[0].type:
                replace_op(op, [op.operands[WHOLE_WINDOW[op.name]]])


def _is_identity(op: ir.Operation) -> bool:
    if len(op.results) != 1 or len(op.operands) != 1:
        return False
    if op.operands[0].type != op.results[0].type:
        return False
    dims_attr = IDENTITY_FOLDABLE[op.name]
    if dims_attr is None:
        return True
    dims = list(ir.DenseI64ArrayAttr(op.attributes[dims_attr]))
    return dims == list(range(len(dims)))
