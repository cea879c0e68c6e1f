"""kiln-if-chains-as-switches: the `scf.if` chains kiln-switches-as-ifs made -> `scf.index_switch`.

kiln-switches-as-ifs turns switches with tensor results into `scf.if` chains so that One-Shot
Bufferize analyses them correctly (lowering/switches_as_ifs.py). Once bufferized, a chain is
only control flow again, and as a switch it is one decision: the GPU plan runs it as one host
"switch" step reading one index back from the device, where the chain would read back one
predicate per case passed (lowering/gpu/control_flow.py, python/kiln/runtime/gpu_plan.py).
Run it right after one-shot-bufferize, before canonicalize can fold or move the chain's
comparisons.

A chain is found by the `kiln.switch_chain = array<i64: cases>` mark on its outer comparison,
and rebuilt only when it still has the shape kiln-switches-as-ifs gave it: level k is
`scf.if (index == cases[k])` and each else block but the last holds just the next level's
constant, comparison, `scf.if` and a yield of that `scf.if`'s results, every level with the
same result types. Anything else (another pass reshaped it) stays a chain: that is correct,
only one read-back per case slower on the GPU. The mark is removed either way.
"""
from __future__ import annotations

from torch_mlir import ir

from .ir_util import constant_int, walk
from .patterns import replace_op
from .switches_as_ifs import CHAIN_MARK

_EQ = 0  # arith.cmpi predicate "eq"


def if_chains_as_switches(module: ir.Module) -> None:
    with module.context:
        marked = [o for o in walk(module.operation)
                  if o.name == "arith.cmpi" and CHAIN_MARK in o.attributes]
        for head in marked:
            cases = list(ir.DenseI64ArrayAttr(head.attributes[CHAIN_MARK]))
            del head.attributes[CHAIN_MARK]
            levels = _chain_levels(head, cases)
            if levels is not None:
                _rebuild_switch(head, levels, cases)


def _chain_levels(head: ir.Operation, cases: list[int]) -> list[ir.Operation] | None:
    """The chain's `scf.if` ops, outer first, or None where it lost its original shape."""
    users = [u.owner for u in head.results[0].uses]
    if len(users) != 1 or users[0].name != "scf.if" or not cases:
        return None
    outer = users[0].operation
    index = head.operands[0]
    types = [r.type for r in outer.results]
    levels, level, compare = [], outer, head
    for k, case in enumerate(cases):
        if (level.operands[0] != compare.results[0] or not _compares(compare, index, case)
                or [r.type for r in level.results] != types):
            return None
        levels.append(level)
        if k + 1 == len(cases):
            return levels
        inner = _next_level(level)
        if inner is None:
            return None
        compare, level = inner
    return None


def _compares(compare: ir.Operation, index: ir.Value, case: int) -> bool:
    """Whether `compare` is `arith.cmpi eq, index, (constant case)`."""
    return (compare.name == "arith.cmpi" and compare.operands[0] == index
            and ir.IntegerAttr(compare.attributes["predicate"]).value == _EQ
            and constant_int(compare.operands[1]) == case)


def _next_level(level: ir.Operation) -> tuple[ir.Operation, ir.Operation] | None:
    """(comparison, scf.if) of the level in `level`'s else block, when that block holds only
    them, their constant and a yield of the inner `scf.if`'s results."""
    ops = [o.operation for o in level.regions[1].blocks[0].operations]
    if [o.name for o in ops] != ["arith.constant", "arith.cmpi", "scf.if", "scf.yield"]:
        return None
    constant, compare, inner, terminator = ops
    if (compare.operands[1] != constant.results[0] or len(list(compare.results[0].uses)) != 1
            or list(terminator.operands) != list(inner.results)):
        return None
    return compare, inner


def _rebuild_switch(head: ir.Operation, levels: list[ir.Operation], cases: list[int]) -> None:
    outer = levels[0]
    with ir.InsertionPoint(outer), outer.location:
        switch = ir.Operation.create(
            "scf.index_switch", results=[r.type for r in outer.results],
            operands=[head.operands[0]], attributes={"cases": ir.DenseI64ArrayAttr.get(cases)},
            regions=1 + len(cases))
    # Regions: the default first, then one per case value, in the order of `cases`.
    levels[-1].regions[1].blocks[0].append_to(switch.regions[0])
    for k, level in enumerate(levels):
        level.regions[0].blocks[0].append_to(switch.regions[1 + k])
    replace_op(outer, list(switch.results))
    constant = head.operands[1].owner.operation
    head.erase()
    if not list(constant.results[0].uses):
        constant.erase()
