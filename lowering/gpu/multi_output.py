"""Multi-output fusion (XLA's, for loop fusions): an elementwise producer whose result is also
needed elsewhere (returned, or read by another op) is computed in its consumer's kernel, which
then writes both results.

Upstream `linalg-fuse-elementwise-ops` fuses a producer into its consumer only when the
consumer is its one user; otherwise the producer stays a kernel of its own and the consumer's
kernel reads its result back from device memory. Here the two become one linalg.generic with
both outputs: one pass over the inputs instead of two, and the producer's result written once
and never read back.

A pair qualifies when both generics are all-parallel over the same static iteration space,
the producer writes its one result with the identity map, the consumer reads it with the
identity map (and only so: not also by a tensor.extract in its body, as a sorting network's
steps do), neither body has regions, and every other user of the producer's result comes
after the consumer in the same block (the fused op takes the consumer's place).
"""
from __future__ import annotations

from torch_mlir import ir

from ..ir_util import all_parallel, operand_segments, walk


def multi_output_fusion(module: ir.Module) -> None:
    changed = True
    while changed:  # a fused op may qualify again, with the next producer
        changed = False
        for op in list(walk(module.operation)):
            if op.name == "linalg.generic" and _fuse_one_producer(op):
                changed = True
                break


def _fuse_one_producer(consumer: ir.Operation) -> bool:
    if not _on_tensors(consumer) or not all_parallel(consumer):
        return False
    inputs = _inputs(consumer)
    maps = _maps(consumer)
    for value in inputs:
        if not isinstance(value.owner, (ir.Operation, ir.OpView)):
            continue
        producer = value.owner.operation
        if producer.name != "linalg.generic" or not _on_tensors(producer):
            continue
        reads = [i for i, v in enumerate(inputs) if v == value]  # it may be read twice
        if _qualifies(producer, consumer, [maps[i] for i in reads]):
            _fuse(producer, consumer, reads)
            return True
    return False


def _on_tensors(op: ir.Operation) -> bool:
    return len(op.results) > 0 and all(isinstance(v.type, ir.RankedTensorType)
                                       for v in list(op.operands) + list(op.results))


def _qualifies(producer: ir.Operation, consumer: ir.Operation,
               read_maps: list[ir.AffineMap]) -> bool:
    if not all_parallel(producer) or len(producer.results) != 1:
        return False
    if producer.parent is None or producer.block != consumer.block:
        return False
    if _has_regions_inside(producer) or _has_regions_inside(consumer):
        return False
    result = producer.results[0]
    out_map = _maps(producer)[-1]
    if not (_is_identity(out_map) and all(_is_identity(m) for m in read_maps)):
        return False
    shape = ir.RankedTensorType(result.type)
    consumer_shape = ir.RankedTensorType(consumer.results[0].type)
    if not (shape.has_static_shape and consumer_shape.has_static_shape
            and list(shape.shape) == list(consumer_shape.shape)
            and _loops(producer) == _loops(consumer) == shape.rank):
        return False
    others = [u for u in _users(result) if u != consumer]
    if not others:
        return False  # its only user: upstream's elementwise fusion does this one
    return all(_comes_after(u, consumer) for u in others)


def _fuse(producer: ir.Operation, consumer: ir.Operation, reads: list[int]) -> None:
    p_inputs, c_inputs = _inputs(producer), _inputs(consumer)
    p_outputs, c_outputs = _outputs(producer), _outputs(consumer)
    p_maps, c_maps = _maps(producer), _maps(consumer)
    kept = [i for i in range(len(c_inputs)) if i not in reads]
    inputs = p_inputs + [c_inputs[i] for i in kept]
    outputs = p_outputs + c_outputs
    maps = (p_maps[:len(p_inputs)] + [c_maps[i] for i in kept] + p_maps[len(p_inputs):]
            + c_maps[len(c_inputs):])
    result_types = [r.type for r in producer.results] + [r.type for r in consumer.results]
    with ir.InsertionPoint(consumer), consumer.location:
        fused = ir.Operation.create(
            "linalg.generic", results=result_types, operands=inputs + outputs,
            attributes={
                **{name: consumer.attributes[name] for name in consumer.attributes},  # marks too
                "indexing_maps": ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in maps]),
                "operandSegmentSizes": ir.DenseI32ArrayAttr.get([len(inputs), len(outputs)]),
            }, regions=1)
    p_body, c_body = producer.regions[0].blocks[0], consumer.regions[0].blocks[0]
    arg_types = ([a.type for a in p_body.arguments][:len(p_inputs)]
                 + [c_body.arguments[i].type for i in kept]
                 + [a.type for a in p_body.arguments][len(p_inputs):]
                 + [a.type for a in c_body.arguments][len(c_inputs):])
    with consumer.location:
        body = fused.regions[0].blocks.append(*arg_types)
    args = list(body.arguments)
    n_p, n_k = len(p_inputs), len(kept)
    mapping = {}
    for i in range(n_p):
        mapping[_key(p_body.arguments[i])] = args[i]
    for j, i in enumerate(kept):
        mapping[_key(c_body.arguments[i])] = args[n_p + j]
    for j in range(len(p_outputs)):
        mapping[_key(p_body.arguments[n_p + j])] = args[n_p + n_k + j]
    for j in range(len(c_outputs)):
        mapping[_key(c_body.arguments[len(c_inputs) + j])] = args[n_p + n_k + len(p_outputs) + j]
    with ir.InsertionPoint(body), consumer.location:
        produced = _clone_body(p_body, mapping)
        for i in reads:
            mapping[_key(c_body.arguments[i])] = produced[0]
        consumed = _clone_body(c_body, mapping)
        ir.Operation.create("linalg.yield", operands=produced + consumed)
    producer.results[0].replace_all_uses_with(fused.results[0])
    for r, new in zip(consumer.results, fused.results[1:]):
        r.replace_all_uses_with(new)
    consumer.erase()
    producer.erase()


def _clone_body(block: ir.Block, mapping: dict) -> list[ir.Value]:
    """Clone `block`'s ops at the insertion point, operands through `mapping` (extended with
    each clone's results); the values its linalg.yield yields."""
    for op in block.operations:
        op = op.operation
        if op.name == "linalg.yield":
            return [mapping.get(_key(v), v) for v in op.operands]
        clone = op.clone()
        for i, operand in enumerate(op.operands):
            if _key(operand) in mapping:
                clone.operands[i] = mapping[_key(operand)]
        for old, new in zip(op.results, clone.results):
            mapping[_key(old)] = new
    raise AssertionError("a linalg.generic body ends in linalg.yield")


def _key(value: ir.Value):
    return value  # ir.Value hashes and compares by the value it names


def _loops(op: ir.Operation) -> int:
    return len(ir.ArrayAttr(op.attributes["iterator_types"]))


def _maps(op: ir.Operation) -> list[ir.AffineMap]:
    return [ir.AffineMapAttr(m).value for m in ir.ArrayAttr(op.attributes["indexing_maps"])]


def _inputs(op: ir.Operation) -> list[ir.Value]:
    n, _ = operand_segments(op)
    return list(op.operands)[:n]


def _outputs(op: ir.Operation) -> list[ir.Value]:
    n, m = operand_segments(op)
    return list(op.operands)[n:n + m]


def _is_identity(amap: ir.AffineMap) -> bool:
    return amap.n_symbols == 0 and amap == ir.AffineMap.get_identity(amap.n_dims)


def _has_regions_inside(op: ir.Operation) -> bool:
    return any(len(inner.operation.regions) for inner in op.regions[0].blocks[0].operations)


def _users(value: ir.Value) -> list[ir.Operation]:
    return [use.owner.operation for use in value.uses]


def _comes_after(user: ir.Operation, anchor: ir.Operation) -> bool:
    """Whether `user` (or the op of `anchor`'s block that holds it) is after `anchor`."""
    block = anchor.block
    user = user.operation
    while user.block != block:
        parent = user.parent
        if parent is None:
            return False
        user = parent.operation
    if user == anchor:
        return False  # read inside the consumer (a tensor.extract at another position)
    for op in block.operations:
        if op.operation == anchor:
            return True   # the anchor came first
        if op.operation == user:
            return False
    return False
