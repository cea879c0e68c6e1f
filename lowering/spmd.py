"""kiln-spmd-partition: a global program with shardings -> the program each device runs
(seed 002's sharding stage; XLA's SPMD partitioner has the same job).

Input, as the front ends leave it (dialects/sdy.py for Shardy, `import_gspmd` below for
GSPMD's `mhlo.sharding`): the entry's arguments and results carry `kiln.sharding` (a
python/kiln/distributed/sharding.py grid, as JSON), and shard_map bodies sit between
`kiln.spmd.to_local` / `kiln.spmd.to_global` custom calls.

Output: the entry takes and returns each device's shard. A sharded argument is gathered
into its global value where the program needs it whole (all_gather along each split
dimension), and a sharded result is sliced out of its global value at the device's offsets
(`partition_id` indexes a table) -- except where a shard_map body reads or writes the shard
as is, which costs nothing. Outside shard_map bodies every device computes whole values:
correct for any program, but only shard_map bodies split the work (the closing note of
issue #15 says so; propagating shardings through ops is the next step).
"""
from __future__ import annotations

import numpy as np
from torch_mlir import ir

from ..distributed.groups import device_counts
from ..distributed.sharding import Sharding, from_hlo
from ..errors import KilnError
from .ir_util import find_entry, function_type, walk

SHARDING = "kiln.sharding"
TO_LOCAL = "kiln.spmd.to_local"
TO_GLOBAL = "kiln.spmd.to_global"
_GSPMD = "mhlo.sharding"
_GSPMD_TARGETS = ("Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape")


def _target(op: ir.Operation) -> str | None:
    if op.name != "stablehlo.custom_call":
        return None
    return ir.StringAttr(op.attributes["call_target_name"]).value


def _value_attrs(func: ir.Operation, key: str, count: int) -> list[dict]:
    if key not in func.attributes:
        return [{} for _ in range(count)]
    out = []
    for attrs in ir.ArrayAttr(func.attributes[key]):
        attrs = ir.DictAttr(attrs)
        out.append({attrs[j].name: attrs[j].attr for j in range(len(attrs))})
    return out


def _sharding_of(attrs: dict, rank: int, devices: int, what: str) -> Sharding | None:
    if SHARDING in attrs:
        return Sharding.from_json(ir.StringAttr(attrs[SHARDING]).value)
    if _GSPMD in attrs:
        s = from_hlo(ir.StringAttr(attrs[_GSPMD]).value, rank, devices, what)
        return None if s == "manual" else s
    return None


def entry_shardings(module: ir.Module, entry: str | None):
    """(argument shardings, result shardings) of the entry, None where a value is whole on
    every device. A JAX wrapper @main that passes an argument straight to the function that
    carries its sharding counts as carrying it too."""
    func = find_entry(module, entry)
    ftype = function_type(func)
    _, devices = device_counts(module)
    args = _value_attrs(func, "arg_attrs", len(ftype.inputs))
    results = _value_attrs(func, "res_attrs", len(ftype.results))
    block = func.regions[0].blocks[0]
    callees = {}
    for op in walk(func):
        if op.name == "func.call":
            callees[op] = find_entry(module, ir.FlatSymbolRefAttr(op.attributes["callee"]).value)
    arg_shardings = []
    for i, t in enumerate(ftype.inputs):
        rank = ir.RankedTensorType(t).rank if isinstance(t, ir.RankedTensorType) else 0
        found = _sharding_of(args[i], rank, devices, f"argument {i}")
        if found is None:
            for call, callee in callees.items():
                for j, v in enumerate(call.operands):
                    if v == block.arguments[i]:
                        inner = _value_attrs(callee, "arg_attrs", len(call.operands))[j]
                        found = found or _sharding_of(inner, rank, devices, f"argument {i}")
        arg_shardings.append(found)
    result_shardings = []
    for i, t in enumerate(ftype.results):
        rank = ir.RankedTensorType(t).rank if isinstance(t, ir.RankedTensorType) else 0
        result_shardings.append(_sharding_of(results[i], rank, devices, f"result {i}"))
    return arg_shardings, result_shardings


def is_partitioned(module: ir.Module) -> bool:
    """Whether the program is split over devices: shardings on an entry value, or markers."""
    for op in walk(module.operation):
        if op.name == "stablehlo.custom_call" and (_target(op) in (TO_LOCAL, TO_GLOBAL) or
                                                   _target(op) in _GSPMD_TARGETS):
            return True
        if op.name == "func.func":
            for key in ("arg_attrs", "res_attrs"):
                if key in op.attributes and any(
                        name in (SHARDING, _GSPMD) for d in ir.ArrayAttr(op.attributes[key])
                        for name in [ir.DictAttr(d)[j].name for j in range(len(ir.DictAttr(d)))]):
                    return True
    return False


# ---- building ------------------------------------------------------------------------------------

def _i64(v: int) -> ir.IntegerAttr:
    return ir.IntegerAttr.get(ir.IntegerType.get_signless(64), v)


def _call(target: str, operand: ir.Value, result: ir.Type, sharding: Sharding) -> ir.Value:
    return ir.Operation.create(
        "stablehlo.custom_call", results=[result], operands=[operand],
        attributes={"call_target_name": ir.StringAttr.get(target),
                    SHARDING: ir.StringAttr.get(sharding.to_json())}).result


def _local_type(t: ir.Type, sharding: Sharding, what: str) -> ir.RankedTensorType:
    ranked = ir.RankedTensorType(t)
    if not ranked.has_static_shape:
        raise KilnError(f"{what}: sharded values need static shapes")
    return ir.RankedTensorType.get(list(sharding.local_shape(ranked.shape, what)),
                                   ranked.element_type)


def _slice_local(value: ir.Value, sharding: Sharding, devices: int, what: str) -> ir.Value:
    """This device's shard of `value`: a dynamic_slice at a row of an offset table indexed
    by partition_id. Of a shard's partial values (unreduced axes), the first holder gets the
    shard and the others zeros, which sum to it."""
    from .legalize.hlo_builder import HloBuilder
    t = ir.RankedTensorType(value.type)
    shape = list(t.shape)
    local = sharding.local_shape(shape, what)
    partial = sharding.partials > 1  # one more column: the device's partial index
    table = np.zeros((devices, len(shape) + partial), np.int64)
    for d in set(sharding.devices):
        table[d, :len(shape)] = sharding.offsets(d, shape)
        if partial:
            table[d, -1] = sharding.partial_index(d)
    h = HloBuilder()
    pid = ir.Operation.create("stablehlo.partition_id",
                              results=[ir.RankedTensorType.get([], ir.IntegerType.get_unsigned(32))]).result
    pid = h.convert(pid, "i64")
    width = table.shape[1]
    row = h.dynamic_slice(h.constant(table, "i64"), [pid, h.constant(np.array(0, np.int64), "i64")],
                          [1, width])
    column = [h.reshape(h.slice(row, [0, k], [1, k + 1]), []) for k in range(width)]
    shard = h.dynamic_slice(value, column[:len(shape)], list(local))
    if not partial:
        return shard
    first = h.compare("EQ", column[-1], h.constant(np.array(0, np.int64), "i64"))
    zeros = ir.Operation.create("stablehlo.constant", results=[shard.type],
                                attributes={"value": _zeros(shard.type)}).result
    return h.select(h.broadcast(first, list(local), []), shard, zeros)


def _zeros(t: ir.Type) -> ir.DenseElementsAttr:
    """A splat of zeros of tensor type `t` (any element type: false, 0, 0.0, (0, 0))."""
    element = ir.RankedTensorType(t).element_type
    if isinstance(element, ir.ComplexType):
        return ir.DenseElementsAttr(ir.Attribute.parse(f"dense<(0.0,0.0)> : {t}"))
    if isinstance(element, ir.FloatType):
        return ir.DenseElementsAttr.get_splat(t, ir.FloatAttr.get(element, 0.0))
    return ir.DenseElementsAttr.get_splat(t, ir.IntegerAttr.get(element, 0))


def _sum_partials(value: ir.Value, sharding: Sharding) -> ir.Value:
    """Every holder of a shard's partial values gets their sum (an all_reduce over them)."""
    t = ir.RankedTensorType(value.type)
    scalar = ir.RankedTensorType.get([], t.element_type)
    groups = ir.DenseElementsAttr.get(np.array(sharding.reduce_groups(), np.int64))
    op = ir.Operation.create(
        "stablehlo.all_reduce", results=[t], operands=[value],
        attributes={"replica_groups": groups,
                    "channel_handle": ir.Attribute.parse(
                        "#stablehlo.channel_handle<handle = 1, type = 0>"),
                    "use_global_device_ids": ir.UnitAttr.get()}, regions=1)
    block = op.regions[0].blocks.append(scalar, scalar)
    adds = "stablehlo.or" if t.element_type == ir.IntegerType.get_signless(1) else \
        "stablehlo.add"
    with ir.InsertionPoint(block):
        total = ir.Operation.create(adds, results=[scalar],
                                    operands=[block.arguments[0], block.arguments[1]]).result
        ir.Operation.create("stablehlo.return", operands=[total])
    return op.result


def _gather_global(value: ir.Value, sharding: Sharding, shape: list[int]) -> ir.Value:
    """The global value from every device's shard: partial values summed, then one
    all_gather per split dimension."""
    if sharding.partials > 1:
        value = _sum_partials(value, sharding)
    t = ir.RankedTensorType(value.type)
    current = list(t.shape)
    for dim, tiles in enumerate(sharding.tiles):
        if tiles == 1:
            continue
        groups = sharding.gather_groups(dim)
        current[dim] *= tiles
        out = ir.RankedTensorType.get(list(current), t.element_type)
        attr = ir.DenseElementsAttr.get(np.array(groups, np.int64))
        value = ir.Operation.create(
            "stablehlo.all_gather", results=[out], operands=[value],
            attributes={"all_gather_dim": _i64(dim), "replica_groups": attr,
                        "channel_handle": ir.Attribute.parse(
                            "#stablehlo.channel_handle<handle = 1, type = 0>"),
                        "use_global_device_ids": ir.UnitAttr.get()}).result
    if current != list(shape):
        raise KilnError(f"gathering a {list(t.shape)} shard gave {current}, expected {shape}")
    return value


# ---- the pass ------------------------------------------------------------------------------------

def import_gspmd(module: ir.Module) -> None:
    """GSPMD's form (older JAX exports, HLO dumps): @Sharding annotations, and shard_map
    bodies between @SPMDFullToShardShape / @SPMDShardToFullShape, as Kiln's markers."""
    _, devices = device_counts(module)
    for op in list(walk(module.operation)):
        name = _target(op)
        if name not in ("SPMDFullToShardShape", "SPMDShardToFullShape"):
            continue
        source = op.operands[0].owner
        if name == "SPMDFullToShardShape":
            carrier = source if isinstance(source, ir.OpView) and _target(source.operation) == "Sharding" else op
        else:
            carrier = op
        carrier = carrier.operation if isinstance(carrier, ir.OpView) else carrier
        rank = ir.RankedTensorType(op.operands[0].type).rank
        sharding = from_hlo(ir.StringAttr(carrier.attributes[_GSPMD]).value, rank, devices,
                            f"{name} at {op.location}")
        if sharding == "manual":
            raise KilnError(f"{name} at {op.location}: its operand's sharding is not given",
                            hint="GSPMD puts it on a @Sharding custom call just before")
        with ir.InsertionPoint(op), op.location:
            marker = _call(TO_LOCAL if name == "SPMDFullToShardShape" else TO_GLOBAL,
                           op.operands[0], op.results[0].type, sharding)
        op.results[0].replace_all_uses_with(marker)
        op.erase()
    for op in list(walk(module.operation)):
        if _target(op) == "Sharding":
            op.results[0].replace_all_uses_with(op.operands[0])
            op.erase()


def annotate_entry(module: ir.Module, entry: str | None = None) -> None:
    """Put on the entry's own arguments the shardings its JAX wrapper only passes on, so
    they survive inlining."""
    if not is_partitioned(module):
        return
    arg_shardings, _ = entry_shardings(module, entry)
    func = find_entry(module, entry)
    attrs = _value_attrs(func, "arg_attrs", len(function_type(func).inputs))
    for d, sharding in zip(attrs, arg_shardings):
        if sharding is not None and SHARDING not in d:
            d[SHARDING] = ir.StringAttr.get(sharding.to_json())
    func.attributes["arg_attrs"] = ir.ArrayAttr.get([ir.DictAttr.get(d) for d in attrs])


def partition(module: ir.Module, entry: str | None = None) -> None:
    if not is_partitioned(module):
        return  # one device, or replicas running one whole program each: nothing to split
    annotate_entry(module, entry)
    # JAX wraps its function in a @main that calls it: inlined, the markers at its
    # boundary meet the entry's arguments and results.
    from torch_mlir import passmanager
    from .call_bounds import check_inlining_growth
    check_inlining_growth(module, "<module>")
    passmanager.PassManager.parse("builtin.module(inline{default-pipeline=})",
                                  module.context).run(module.operation)
    with ir.Location.unknown(module.context):
        _partition(module, entry)


def _partition(module: ir.Module, entry: str | None) -> None:
    replicas, devices = device_counts(module)
    if replicas != 1:
        raise KilnError(f"a partitioned program with {replicas} replicas: Kiln partitions "
                        "programs of one replica", hint="set mhlo.num_replicas = 1")
    arg_shardings, result_shardings = entry_shardings(module, entry)
    import_gspmd(module)
    func = find_entry(module, entry)
    ftype = function_type(func)
    block = func.regions[0].blocks[0]
    inputs, outputs = list(ftype.inputs), list(ftype.results)

    for i, sharding in enumerate(arg_shardings):
        if sharding is None or sharding.is_replicated:
            continue
        arg = block.arguments[i]
        global_type = ir.RankedTensorType(arg.type)
        local_type = _local_type(global_type, sharding, f"argument {i}")
        uses = [(u.owner.operation, u.operand_number) for u in arg.uses]
        direct = [op for op, _ in uses if _target(op) == TO_LOCAL and
                  Sharding.from_json(ir.StringAttr(op.attributes[SHARDING]).value) == sharding]
        others = [(op, n) for op, n in uses if op not in direct]
        arg.set_type(local_type)
        inputs[i] = local_type
        for marker in direct:   # a shard_map reads the argument's shard as is
            marker.results[0].replace_all_uses_with(arg)
            marker.erase()
        if others:              # the rest needs the whole value
            with ir.InsertionPoint.at_block_begin(block), func.location:
                whole = _call(TO_GLOBAL, arg, global_type, sharding)
            for op, n in others:
                op.operands[n] = whole

    terminator = block.operations[len(block.operations) - 1]
    for i, sharding in enumerate(result_shardings):
        if sharding is None or sharding.is_replicated:
            continue
        value = terminator.operands[i]
        local_type = _local_type(value.type, sharding, f"result {i}")
        owner = value.owner
        if isinstance(owner, ir.OpView) and _target(owner.operation) == TO_GLOBAL and \
                Sharding.from_json(ir.StringAttr(owner.operation.attributes[SHARDING]).value) == sharding:
            local = owner.operation.operands[0]   # a shard_map wrote the result's shard
        else:
            with ir.InsertionPoint(terminator), terminator.location:
                local = _call(TO_LOCAL, value, local_type, sharding)
        terminator.operands[i] = local
        outputs[i] = local_type
    func.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(inputs, outputs))

    # What is left of the markers becomes slices and gathers.
    for op in list(walk(module.operation)):
        name = _target(op)
        if name not in (TO_LOCAL, TO_GLOBAL):
            continue
        if not any(True for _ in op.results[0].uses):
            op.erase()  # its value is used as a shard only (a result written by a shard_map)
            continue
        sharding = Sharding.from_json(ir.StringAttr(op.attributes[SHARDING]).value)
        with ir.InsertionPoint(op), op.location:
            if name == TO_LOCAL:
                new = _slice_local(op.operands[0], sharding, devices, f"value at {op.location}")
            else:
                new = _gather_global(op.operands[0], sharding,
                                     list(ir.RankedTensorType(op.results[0].type).shape))
        op.results[0].replace_all_uses_with(new)
        op.erase()
    for op in walk(module.operation):
        if op.name == "func.func":
            for key in ("arg_attrs", "res_attrs"):
                if key in op.attributes:
                    op.attributes[key] = ir.ArrayAttr.get([
                        ir.DictAttr.get({k: v for k, v in d.items() if k not in (SHARDING, _GSPMD)})
                        for d in _value_attrs(op, key, len(ir.ArrayAttr(op.attributes[key])))])
