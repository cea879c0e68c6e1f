"""kiln-fuse-shared-elementwise: fuse elementwise producers that have several users.

Upstream `linalg-fuse-elementwise-ops` fuses a producer into its consumer only when the
consumer is the producer's one user. Integer-heavy elementwise programs are DAGs, not
chains: each round of threefry (`x0 += x1; x1 = rotl(x1, r) ^ x0`) reads every value twice,
so nothing fused and every round went through memory (jax.random.normal of 4M: 16 passes
over 16 MB arrays per loop iteration). XLA's fusion duplicates cheap producers into each
consumer instead; so does this pass, before upstream's:

a consumer `linalg.generic` (all parallel) that reads, through its identity map, the result
of an all-parallel `linalg.generic` producer in the same block with an identity output map
and the same iteration space gets the producer's body cloned into its own, reading the
producer's inputs directly. The producer stays for its other users (and disappears once it
has none). CSE afterwards merges the copies that meet in one body, so a DAG becomes one
loop computing each value once per element.

Only cheap producers are duplicated: bodies of at most MAX_PRODUCER_OPS arith ops (and
linalg.index), no division (slow) and no math ops (transcendentals: XLA does not duplicate
those either), copied into at most MAX_COPIES users unless tiny, and the fused body stays
under MAX_BODY_OPS ops (copies that meet in one body are merged right away).

It also erases the generics that write nothing, which upstream fusion leaves behind when a
body calls libm (log1pf: MLIR cannot tell the call is pure), so the pipeline runs it again
after upstream's last fusion. Fusing changes no arithmetic: each element is
computed by the same ops in the same order.
"""
from __future__ import annotations

from torch_mlir import ir

from .ir_util import all_parallel, clone_ops, operand_segments


MAX_PRODUCER_OPS = 64
MAX_BODY_OPS = 160
MAX_COPIES = 4   # users a producer above TINY_OPS ops is copied into, at most
TINY_OPS = 8
_MAX_ROUNDS = 64
_EXPENSIVE = ("arith.divf", "arith.divsi", "arith.divui", "arith.remf", "arith.remsi",
              "arith.remui", "arith.ceildivsi", "arith.ceildivui", "arith.floordivsi")


def fuse_shared_elementwise(module: ir.Module) -> None:
    _drop_dead_generics(module)
    for _ in range(_MAX_ROUNDS):
        if not _fuse_one_round(module):
            return


# libm functions Kiln calls from elementwise bodies (kiln-accurate-libm-calls): pure.
_PURE_CALLS = ("log1p", "log1pf", "expm1", "expm1f")


def _drop_dead_generics(module: ir.Module) -> None:
    """Erase generics that write nothing. Upstream fusion leaves a fused producer behind,
    results dropped, when its body calls a function (libm's log1pf): MLIR cannot tell the
    call is pure, so the loop would still run, for nothing."""
    for op in _generics(module.operation):
        if op.results or operand_segments(op)[1]:
            continue
        body = _body_ops(op)
        if all(not o.regions and (o.name.split(".")[0] in ("arith", "math", "linalg") or (
                o.name == "func.call" and
                ir.FlatSymbolRefAttr(o.attributes["callee"]).value in _PURE_CALLS))
               for o in body):
            op.erase()


def _fuse_one_round(module: ir.Module) -> bool:
    changed = False
    for consumer in _generics(module.operation):
        if _fuse_into(consumer):
            changed = True
    return changed


def _generics(op: ir.Operation) -> list[ir.Operation]:
    """The linalg.generics nested in `op`, in program order. Their bodies are not searched
    (scalar code only): a round walks the loops and functions, not every fused body."""
    found = []
    for region in op.regions:
        for block in region.blocks:
            for child in block.operations:
                child = child.operation
                if child.name == "linalg.generic":
                    found.append(child)
                elif len(child.regions):
                    found.extend(_generics(child))
    return found


def _maps(op: ir.Operation) -> list[ir.AffineMap]:
    return [ir.AffineMapAttr(m).value for m in ir.ArrayAttr(op.attributes["indexing_maps"])]


def _body(op: ir.Operation) -> ir.Block:
    return op.regions[0].blocks[0]


def _body_ops(op: ir.Operation) -> list[ir.Operation]:
    return [o.operation for o in _body(op).operations]


def _is_identity(m: ir.AffineMap) -> bool:
    return m.n_symbols == 0 and m.n_dims == len(m.results) and \
        str(m) == str(ir.AffineMap.get_identity(m.n_dims))


def _cheap_producer(producer: ir.Operation, result_index: int) -> bool:
    if producer.name != "linalg.generic" or not all_parallel(producer) or \
            len(producer.regions) != 1 or len(producer.regions[0].blocks) != 1:
        return False
    n_in, n_out = operand_segments(producer)
    maps = _maps(producer)
    if not _is_identity(maps[n_in + result_index]):
        return False
    if any(m.n_symbols or not m.is_projected_permutation for m in maps[:n_in]):
        return False
    block = _body(producer)
    args = list(block.arguments)
    if any(list(a.uses) for a in args[n_in:]):   # reads its outputs: not elementwise
        return False
    ops = _body_ops(producer)
    # linalg.index: the consumer iterates the same space, so the index is the same there.
    return _size(ops) <= MAX_PRODUCER_OPS and all(
        (o.name.startswith("arith.") or o.name == "linalg.index") and
        o.name not in _EXPENSIVE and not o.regions for o in ops[:-1])


def _size(ops: list[ir.Operation]) -> int:
    """Ops that compute (constants and index reads are free)."""
    return sum(1 for o in ops if o.name not in ("arith.constant", "linalg.index", "linalg.yield"))


def _owner(value: ir.Value) -> ir.Operation | None:
    owner = value.owner
    owner = getattr(owner, "operation", owner)
    return owner if isinstance(owner, ir.Operation) else None


def _fuse_into(consumer: ir.Operation) -> bool:
    if not all_parallel(consumer) or len(consumer.regions[0].blocks) != 1:
        return False
    n_in, n_out = operand_segments(consumer)
    maps = _maps(consumer)
    operands = list(consumer.operands)
    for i in range(n_in):
        producer = _owner(operands[i])
        if producer is None or producer.name != "linalg.generic" or \
                producer.block != consumer.block or producer == consumer:
            continue
        users = sum(len(list(r.uses)) for r in producer.results)
        if users < 2:
            continue  # one user: upstream fuses it (and drops the producer)
        if users > MAX_COPIES and _size(_body_ops(producer)) > TINY_OPS:
            continue  # many copies of a real computation cost more than the memory pass
        result_index = [r for r in producer.results].index(operands[i]) \
            if operands[i] in list(producer.results) else None
        if result_index is None or not _is_identity(maps[i]) or \
                _maps(producer)[0].n_dims != maps[i].n_dims or \
                not _cheap_producer(producer, result_index):
            continue
        if _size(_body_ops(consumer)) + _size(_body_ops(producer)) > MAX_BODY_OPS:
            continue
        _fuse(producer, result_index, consumer, i)
        return True
    return False


def _fuse(producer: ir.Operation, result_index: int, consumer: ir.Operation, i: int) -> None:
    p_in, _ = operand_segments(producer)
    c_in, c_out = operand_segments(consumer)
    p_maps, c_maps = _maps(producer), _maps(consumer)
    p_operands, c_operands = list(producer.operands), list(consumer.operands)
    inputs = c_operands[:i] + c_operands[i + 1:c_in] + p_operands[:p_in]
    outputs = c_operands[c_in:]
    maps = c_maps[:i] + c_maps[i + 1:c_in] + p_maps[:p_in] + c_maps[c_in:]
    p_args = list(_body(producer).arguments)
    c_args = list(_body(consumer).arguments)
    arg_types = [a.type for a in c_args[:i] + c_args[i + 1:c_in]] + \
        [a.type for a in p_args[:p_in]] + [a.type for a in c_args[c_in:]]
    attributes = {named.name: named.attr for named in
                  (consumer.attributes[k] for k in range(len(consumer.attributes)))}
    attributes["indexing_maps"] = ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in maps])
    attributes["operandSegmentSizes"] = ir.DenseI32ArrayAttr.get([len(inputs), len(outputs)])
    fused = ir.Operation.create("linalg.generic", results=[r.type for r in consumer.results],
                                operands=inputs + outputs, attributes=attributes, regions=1,
                                loc=consumer.location, ip=ir.InsertionPoint(consumer))
    block = fused.regions[0].blocks.append(*arg_types,
                                           arg_locs=[consumer.location] * len(arg_types))
    new_args = list(block.arguments)
    n_kept = c_in - 1
    mapping: dict = {}
    for a, v in zip(p_args[:p_in], new_args[n_kept:n_kept + p_in]):
        mapping[a] = v
    ip = ir.InsertionPoint(block)
    p_ops = _body_ops(producer)
    clone_ops(p_ops[:-1], mapping, ip)
    produced = p_ops[-1].operands[result_index]
    c_mapping: dict = {c_args[i]: mapping.get(produced, produced)}
    for a, v in zip(c_args[:i] + c_args[i + 1:c_in], new_args[:n_kept]):
        c_mapping[a] = v
    for a, v in zip(c_args[c_in:], new_args[n_kept + p_in:]):
        c_mapping[a] = v
    clone_ops(_body_ops(consumer), c_mapping, ip)
    _dedupe(block)
    for old, new in zip(consumer.results, fused.results):
        old.replace_all_uses_with(new)
    consumer.erase()
    if all(not list(r.uses) for r in producer.results):
        producer.erase()


def _dedupe(block: ir.Block) -> None:
    """CSE within one body: the copies of a shared producer meet here (all ops pure)."""
    seen: dict = {}
    for o in [o.operation for o in block.operations][:-1]:
        if o.regions or len(o.results) != 1:
            continue
        # Types and attributes are uniqued in the context: equal means identical, no
        # need to print them.
        key = (o.name, tuple(o.operands), o.results[0].type,
               tuple(sorted(((o.attributes[k].name, o.attributes[k].attr)
                             for k in range(len(o.attributes))), key=lambda item: item[0])))
        if key in seen:
            o.results[0].replace_all_uses_with(seen[key])
            o.erase()
        else:
            seen[key] = o.results[0]
