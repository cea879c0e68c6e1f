"""Tuples at the entry boundary become flat lists of tensors (XLA flattens them the same way
when it hands buffers to the runtime): numpy callers pass and receive leaves in order.

Tokens at the entry boundary become empty bool arrays (`tensor<0xi1>`): a token carries no
data, and that is what JAX passes for one (`np.array([], bool)`) and wraps as a `Token` when
a jitted function returns one. Inside, a token argument is a fresh `stablehlo.after_all`
(nothing to wait for: Kiln runs a program's side effects in order), and a token result is
an empty constant."""
from __future__ import annotations

from torch_mlir import ir

from .ir_util import body_block, find_entry, function_type, set_results


def _leaves(t: ir.Type) -> list[ir.Type]:
    if isinstance(t, ir.TupleType) or str(t).startswith("tuple<"):
        tt = ir.TupleType(t)
        return [leaf for i in range(tt.num_types) for leaf in _leaves(tt.get_type(i))]
    return [t]


def _pack(t: ir.Type, leaves: list[ir.Value], loc) -> ir.Value:
    """Rebuild a (nested) tuple value of type `t` from the front of `leaves`."""
    if not str(t).startswith("tuple<"):
        return leaves.pop(0)
    tt = ir.TupleType(t)
    parts = [_pack(tt.get_type(i), leaves, loc) for i in range(tt.num_types)]
    return ir.Operation.create("stablehlo.tuple", results=[t], operands=parts, loc=loc).result


def _unpack(value: ir.Value, loc) -> list[ir.Value]:
    if not str(value.type).startswith("tuple<"):
        return [value]
    tt = ir.TupleType(value.type)
    out = []
    for i in range(tt.num_types):
        element = ir.Operation.create(
            "stablehlo.get_tuple_element", results=[tt.get_type(i)], operands=[value],
            attributes={"index": ir.IntegerAttr.get(ir.IntegerType.get_signless(32), i)}, loc=loc).result
        out.extend(_unpack(element, loc))
    return out


def flatten_entry_tuples(module: ir.Module, entry: str | None) -> None:
    func = find_entry(module, entry)
    _flatten_tuples(func)
    _tokens_as_empty_arrays(func)


def _is_token(t: ir.Type) -> bool:
    return str(t) == "!stablehlo.token"


def _tokens_as_empty_arrays(func: ir.Operation) -> None:
    ftype = function_type(func)
    types = list(ftype.inputs) + list(ftype.results)
    if not any(_is_token(t) for t in types):
        return
    token = next(t for t in types if _is_token(t))
    block = body_block(func)
    with func.location:
        empty = ir.RankedTensorType.get([0], ir.IntegerType.get_signless(1))
        inputs = list(ftype.inputs)
        for i, t in enumerate(inputs):
            if not _is_token(t):
                continue
            old = block.arguments[i]
            with ir.InsertionPoint(block.operations[0]):
                fresh = ir.Operation.create("stablehlo.after_all", results=[token]).result
            old.replace_all_uses_with(fresh)
            old.set_type(empty)
            inputs[i] = empty
        func.attributes["function_type"] = ir.TypeAttr.get(
            ir.FunctionType.get(inputs, list(ftype.results)))
        ret = block.operations[len(block.operations) - 1].operation
        if any(_is_token(v.type) for v in ret.operands):
            nothing = ir.DenseElementsAttr.get_splat(
                empty, ir.IntegerAttr.get(ir.IntegerType.get_signless(1), 0))
            with ir.InsertionPoint(ret):
                values = [ir.Operation.create("stablehlo.constant", results=[empty],
                                              attributes={"value": nothing}).result
                          if _is_token(v.type) else v for v in ret.operands]
            set_results(func, values)


def _flatten_tuples(func: ir.Operation) -> None:
    ftype = function_type(func)
    if not any(str(t).startswith("tuple<") for t in list(ftype.inputs) + list(ftype.results)):
        return
    block = body_block(func)
    loc = func.location
    first = block.operations[0]
    originals = list(block.arguments)
    new_inputs = [leaf for t in ftype.inputs for leaf in _leaves(t)]
    leaf_args = [block.add_argument(t, loc) for t in new_inputs]
    # Each original argument is rebuilt from its leaves (a plain tensor is its own leaf).
    cursor = list(leaf_args)
    with ir.InsertionPoint(first):
        for arg in originals:
            arg.replace_all_uses_with(_pack(arg.type, cursor, loc))
    for i in reversed(range(len(originals))):
        block.erase_argument(i)
    ret = block.operations[len(block.operations) - 1].operation
    with ir.InsertionPoint(ret):
        flat = [v for value in ret.operands for v in _unpack(value, loc)]
    func.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(new_inputs, function_type(func).results))
    for attr in ("arg_attrs", "res_attrs"):
        if attr in func.attributes:
            del func.attributes[attr]
    set_results(func, flat)
    fold_tuples(func)


def fold_tuples(func: ir.Operation) -> None:
    """get_tuple_element(tuple(a, b...))[i] -> operand i, then drop dead tuple ops (the bundled
    StableHLO has no canonicalization patterns for them)."""
    from .ir_util import walk
    changed = True
    while changed:
        changed = False
        for op in list(walk(func)):
            if op.name != "stablehlo.get_tuple_element":
                continue
            owner = op.operands[0].owner
            if isinstance(owner, ir.Block) or owner.operation.name != "stablehlo.tuple":
                continue
            index = ir.IntegerAttr(op.attributes["index"]).value
            op.results[0].replace_all_uses_with(owner.operation.operands[index])
            op.erase()
            changed = True
        for op in list(walk(func)):
            if op.name in ("stablehlo.tuple", "stablehlo.get_tuple_element") and \
                    all(len(list(r.uses)) == 0 for r in op.results):
                op.erase()
                changed = True
