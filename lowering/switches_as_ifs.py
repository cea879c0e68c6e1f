"""kiln-switches-as-ifs: `scf.index_switch` ops with tensor results -> chains of `scf.if`.

Run just before One-Shot Bufferize, because its analysis of `scf.index_switch` (in the MLIR
Kiln is built with) misses read-after-write conflicts through the switch's results: it does
not see that a result aliases the tensors the branches yield. A write into a buffer that a
result shares, followed by a read of that result, is then done in place and the read sees
the new values. `lax.cond(p, sort, neg, z)` followed by `(r * 0.5, max(r))` did just that:
the multiply wrote into the buffer of `r` (all three shared one CSE'd `tensor.empty`), and
the max read `r * 0.5`. Its analysis of `scf.if` gets the same programs right (it copies
where needed), so each switch becomes
    if (i == case0) {case0} else if (i == case1) {case1} ... else {default}
with the same blocks moved over, unchanged. A switch without cases is its default block,
inlined. Switches without tensor results bufferize correctly and are left alone.

A chain costs one comparison per case before the taken one; `stablehlo.case` from `lax.cond`
and `lax.switch` has few branches, and each branch does far more work than a comparison.

The comparison of the chain's outer `scf.if` carries `kiln.switch_chain = array<i64: cases>`
so that kiln-if-chains-as-switches (lowering/if_chains_as_switches.py) can put the switch back
after bufferization (the GPU plan runs a switch as one host step, a chain as one predicate
read-back per case). The mark is on the `arith.cmpi`, not the `scf.if`: One-Shot Bufferize
rebuilds each `scf.if` without its attributes but leaves the comparison as it is.
"""
from __future__ import annotations

from torch_mlir import ir

from .ir_util import walk
from .patterns import replace_op

_EQ = 0  # arith.cmpi predicate "eq"
CHAIN_MARK = "kiln.switch_chain"  # on the outer comparison: the switch's case values


def switches_as_ifs(module: ir.Module) -> None:
    with module.context:
        for switch in [o for o in walk(module.operation) if o.name == "scf.index_switch"]:
            if any(isinstance(r.type, ir.RankedTensorType) or
                   isinstance(r.type, ir.UnrankedTensorType) for r in switch.results):
                _rewrite(switch)


def _rewrite(switch: ir.Operation) -> None:
    cases = list(ir.DenseI64ArrayAttr(switch.attributes["cases"]))
    # Regions: the default first, then one per case value, in the order of `cases`.
    if not cases:
        _inline_default(switch)
        return
    types = [r.type for r in switch.results]
    with ir.InsertionPoint(switch), switch.location:
        chain = _if_chain(switch, cases, 0, types)
    chain.operands[0].owner.attributes[CHAIN_MARK] = ir.DenseI64ArrayAttr.get(cases)
    replace_op(switch, list(chain.results))


def _if_chain(switch: ir.Operation, cases: list[int], k: int, types: list[ir.Type]) -> ir.Operation:
    """`if (index == cases[k]) {case k} else {the rest}`, built at the insertion point."""
    index = switch.operands[0]
    value = ir.Operation.create(
        "arith.constant", results=[ir.IndexType.get()],
        attributes={"value": ir.IntegerAttr.get(ir.IndexType.get(), cases[k])}).result
    flag = ir.Operation.create(
        "arith.cmpi", results=[ir.IntegerType.get_signless(1)], operands=[index, value],
        attributes={"predicate": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), _EQ)}).result
    branch = ir.Operation.create("scf.if", results=types, operands=[flag], regions=2)
    switch.regions[1 + k].blocks[0].append_to(branch.regions[0])
    if k + 1 == len(cases):
        switch.regions[0].blocks[0].append_to(branch.regions[1])
    else:
        rest = branch.regions[1].blocks.append()
        with ir.InsertionPoint(rest):
            inner = _if_chain(switch, cases, k + 1, types)
            ir.Operation.create("scf.yield", operands=list(inner.results))
    return branch


def _inline_default(switch: ir.Operation) -> None:
    block = switch.regions[0].blocks[0]
    ops = list(block.operations)
    terminator = ops[-1]
    for op in ops[:-1]:
        op.move_before(switch)
    values = list(terminator.operands)
    terminator.erase()
    replace_op(switch, values)
