"""kiln-lower-collectives: seed 001's collectives -> calls of Kiln's collective runtime.

Every collective becomes a `stablehlo.custom_call @kiln.collective.<op>` (a side effect, so
it keeps its place in program order) whose backend config carries what the runtime needs:
the groups resolved to device ids (python/kiln/distributed/groups.py), dimensions, pairs,
channel. The runtime (python/kiln/distributed/collectives.py) moves the data between the
devices' buffers; kiln-lower-custom-calls then lowers these calls like any other.

Combiners: a region that is one add/multiply/maximum/minimum/and/or/xor of its two
arguments is reduced by the runtime. Any other region is kept as code: the runtime gathers
the members' operands (stacked on a new leading dimension, in group order) and a
`stablehlo.map` chain folds them left to right with the region, on every member alike.

The device counts come from the module's `mhlo.num_replicas` / `mhlo.num_partitions`
(1 when absent). On one device `replica_id` and `partition_id` stay for kiln-fix-semantics
to fold to 0.
"""
from __future__ import annotations

import json

import numpy as np
from torch_mlir import ir

from ...distributed import groups as G
from ...errors import KilnError
from ..patterns import pattern_pass
from .collective_shapes import check_result_shapes
from .hlo_builder import HloBuilder, replace_op, shape

TARGET = "kiln.collective."
_SIMPLE = {"stablehlo.add": "add", "stablehlo.multiply": "multiply",
           "stablehlo.maximum": "maximum", "stablehlo.minimum": "minimum",
           "stablehlo.and": "and", "stablehlo.or": "or", "stablehlo.xor": "xor"}


def _where(op: ir.Operation) -> str:
    return str(op.location)


def _groups_attr(op: ir.Operation, name: str = "replica_groups") -> list[list[int]]:
    if name not in op.attributes:
        return []
    attr = ir.DenseElementsAttr(op.attributes[name])
    t = ir.RankedTensorType(attr.type)
    if t.rank != 2:
        raise KilnError(f"{op.name}: {name} must be a 2-D tensor", location=_where(op))
    rows, cols = t.shape
    values = np.array(attr).reshape(rows, cols).tolist()
    # -1 pads groups of unequal size in StableHLO's dense form.
    return [[v for v in row if v >= 0] for row in values if any(v >= 0 for v in row)]


def _channel(op: ir.Operation) -> int:
    if "channel_handle" not in op.attributes:
        return 0
    text = str(op.attributes["channel_handle"])
    try:
        return int(text.split("handle =")[1].split(",")[0])
    except (IndexError, ValueError):
        raise KilnError(f"{op.name}: cannot read channel_handle {text}", location=_where(op)) from None


def _resolved(op: ir.Operation, short: str) -> list[list[int]]:
    replicas, partitions = G.device_counts(op)
    kind = G.mode(short, _channel(op), "use_global_device_ids" in op.attributes)
    try:
        return G.process_groups(kind, _groups_attr(op), replicas, partitions)
    except KilnError as exc:
        exc.location = exc.location or _where(op)
        raise


def _call(op: ir.Operation, target: str, operands, result_types, config: dict) -> ir.Operation:
    i32 = ir.IntegerType.get_signless(32)
    return ir.Operation.create(
        "stablehlo.custom_call", results=list(result_types), operands=list(operands),
        attributes={"call_target_name": ir.StringAttr.get(TARGET + target),
                    "backend_config": ir.StringAttr.get(json.dumps(config)),
                    "has_side_effect": ir.BoolAttr.get(True),
                    "api_version": ir.IntegerAttr.get(i32, 1)},
        loc=op.location, ip=ir.InsertionPoint(op))


def _combiner(op: ir.Operation) -> str | None:
    """The name of a region that is a single known binary op of its two arguments."""
    block = op.regions[0].blocks[0]
    ops = list(block.operations)
    args = list(block.arguments)
    if len(args) != 2 or len(ops) != 2 or ops[1].name != "stablehlo.return":
        return None
    body = ops[0]
    if body.name not in _SIMPLE or {v for v in body.operands} != set(args) \
            or list(ops[1].operands) != [body.results[0]]:
        return None
    return _SIMPLE[body.name]


def _fold(op: ir.Operation, stacked: ir.Value, out_type: ir.Type) -> ir.Value:
    """Fold the leading dimension of `stacked` left to right with op's region (stablehlo.map)."""
    h = HloBuilder()
    count = shape(stacked)[0]
    rest = list(shape(stacked)[1:])
    parts = [h.reshape(h.slice(stacked, [j] + [0] * len(rest), [j + 1] + rest), rest)
             for j in range(count)]
    acc = parts[0]
    for part in parts[1:]:
        mapped = ir.Operation.create("stablehlo.map", results=[out_type], operands=[acc, part],
                                     attributes={"dimensions": ir.DenseI64ArrayAttr.get(list(range(len(rest))))},
                                     regions=1)
        region = mapped.regions[0]
        _clone_region(op.regions[0], region)
        acc = mapped.results[0]
    return acc


def _clone_region(source: ir.Region, dest: ir.Region) -> None:
    block = source.blocks[0]
    new = dest.blocks.append(*[a.type for a in block.arguments])
    mapping = {a: b for a, b in zip(block.arguments, new.arguments)}
    with ir.InsertionPoint(new):
        for inner in block.operations:
            clone = inner.clone()
            for i, v in enumerate(clone.operands):
                if v in mapping:
                    clone.operands[i] = mapping[v]
            for old, fresh in zip(inner.results, clone.results):
                mapping[old] = fresh


def _stacked_type(value_type: ir.Type, count: int) -> ir.RankedTensorType:
    t = ir.RankedTensorType(value_type)
    return ir.RankedTensorType.get([count, *t.shape], t.element_type)


def _reducing(op: ir.Operation, short: str, stacked_target: str, extra: dict,
              out_types: list[ir.Type], root_only: bool = False) -> None:
    groups = _resolved(op, short)
    check_result_shapes(op, short if short == "reduce_scatter" else "all_reduce", groups, **extra)
    config = {"groups": groups, **extra}
    kind = _combiner(op)
    if kind is not None:
        config["reduction"] = kind
        call = _call(op, short, op.operands, out_types, config)
        replace_op(op, list(call.results))
        return
    size = len(groups[0])
    if any(len(g) != size for g in groups):
        raise KilnError(f"{op.name}: replica groups of unequal size {groups}",
                        location=_where(op), hint="every group must have the same size")
    with ir.InsertionPoint(op), op.location:
        values = []
        for operand, out_type in zip(op.operands, out_types):
            piece = ir.RankedTensorType(out_type)
            call = _call(op, stacked_target, [operand], [_stacked_type(piece, size)], config)
            folded = _fold(op, call.results[0], out_type)
            if root_only:
                i1 = ir.IntegerType.get_signless(1)
                root = _call(op, "group_root", [], [ir.RankedTensorType.get([], i1)],
                             {"groups": groups}).results[0]
                h = HloBuilder()
                zero = h.splat(0, piece.shape, piece.element_type) if not ir.ComplexType.isinstance(
                    piece.element_type) else h.complex(h.splat(0.0, piece.shape, ir.ComplexType(piece.element_type).element_type),
                                                       h.splat(0.0, piece.shape, ir.ComplexType(piece.element_type).element_type))
                folded = h.select(root, folded, zero)
            values.append(folded)
    replace_op(op, values)


def _int_attr(op: ir.Operation, name: str) -> int:
    return ir.IntegerAttr(op.attributes[name]).value


# ---- the lowerings -----------------------------------------------------------------------------

def _all_reduce(op):
    _reducing(op, "all_reduce", "all_gather_stacked", {}, [r.type for r in op.results])


def _collective_reduce(op):
    _reducing(op, "collective_reduce", "all_gather_stacked", {}, [r.type for r in op.results],
              root_only=True)


def _reduce_scatter(op):
    dim = _int_attr(op, "scatter_dimension")
    _reducing(op, "reduce_scatter", "all_to_all_stacked", {"dim": dim},
              [r.type for r in op.results])


def _all_gather(op):
    groups = _resolved(op, "all_gather")
    check_result_shapes(op, "all_gather", groups, dim=_int_attr(op, "all_gather_dim"))
    call = _call(op, "all_gather", op.operands, [r.type for r in op.results],
                 {"groups": groups, "dim": _int_attr(op, "all_gather_dim")})
    replace_op(op, list(call.results))


def _all_to_all(op):
    groups = _resolved(op, "all_to_all")
    count = _int_attr(op, "split_count")
    if any(len(g) != count for g in groups):
        raise KilnError(f"all_to_all: split_count {count} does not match its groups {groups}",
                        location=_where(op))
    check_result_shapes(op, "all_to_all", groups, split_dim=_int_attr(op, "split_dimension"),
                        concat_dim=_int_attr(op, "concat_dimension"))
    call = _call(op, "all_to_all", op.operands, [r.type for r in op.results],
                 {"groups": groups, "split_dim": _int_attr(op, "split_dimension"),
                  "concat_dim": _int_attr(op, "concat_dimension")})
    replace_op(op, list(call.results))


def _collective_permute(op):
    replicas, partitions = G.device_counts(op)
    kind = G.mode("collective_permute", _channel(op), False)
    # The pairs number replicas (or partitions) of one domain: all of them form the meeting.
    domains = G.process_groups(kind, [], replicas, partitions)
    pairs = _groups_attr(op, "source_target_pairs")
    targets = [t for _, t in pairs]
    limit = len(domains[0])
    if len(set(targets)) != len(targets) or len({s for s, _ in pairs}) != len(pairs) or \
            any(not 0 <= i < limit for p in pairs for i in p):
        raise KilnError(f"collective_permute: source_target_pairs {pairs} must name each "
                        f"source and target once, within 0..{limit - 1}", location=_where(op))
    check_result_shapes(op, "collective_permute", domains)
    call = _call(op, "collective_permute", op.operands, [r.type for r in op.results],
                 {"groups": domains, "pairs": pairs})
    replace_op(op, list(call.results))


def _collective_broadcast(op):
    groups = _resolved(op, "collective_broadcast")
    check_result_shapes(op, "collective_broadcast", groups)
    call = _call(op, "collective_broadcast", op.operands, [r.type for r in op.results],
                 {"groups": groups})
    replace_op(op, list(call.results))


def _device_id(op):
    if G.device_counts(op) == (1, 1):
        return False  # kiln-fix-semantics folds it to 0
    which = "replica" if op.name == "stablehlo.replica_id" else "partition"
    call = _call(op, "device_id", [], [op.results[0].type], {"which": which})
    replace_op(op, list(call.results))


def _send(op):
    call = _call(op, "send", op.operands, [r.type for r in op.results],
                 {"channel": _channel(op)})
    replace_op(op, list(call.results))


def _recv(op):
    call = _call(op, "recv", op.operands, [r.type for r in op.results],
                 {"channel": _channel(op)})
    replace_op(op, list(call.results))


def _infeed(op):
    call = _call(op, "infeed", op.operands, [r.type for r in op.results], {})
    replace_op(op, list(call.results))


def _print(op):
    """interpreter.print: the value on the host's stdout, as the reference interpreter shows it."""
    call = _call(op, "print", op.operands, [], {"type": str(op.operands[0].type)})
    replace_op(op, list(call.results))


def _probe(op):
    """interpreter.probe: the value passes through, and is recorded under its probe_id for
    check.expect_serialized_eq (the reference interpreter writes it to a file instead)."""
    call = _call(op, "probe", op.operands, [op.results[0].type],
                 {"probe_id": ir.StringAttr(op.attributes["probe_id"]).value})
    replace_op(op, list(call.results))


def _dynamic_root_broadcast(op):
    """collective_broadcast with `has_dynamic_root` (newer StableHLO; the front end reads it as
    this custom call): its last operand says, per data operand, which group member sends."""
    if ir.StringAttr(op.attributes["call_target_name"]).value != TARGET + "collective_broadcast_dynamic" \
            or "backend_config" in op.attributes:
        return False
    groups = _resolved(op, "collective_broadcast")
    call = _call(op, "collective_broadcast_dynamic", op.operands, [r.type for r in op.results],
                 {"groups": groups})
    replace_op(op, list(call.results))


def _ragged_all_to_all(op):
    """JAX's `ragged_all_to_all` custom call (HLO's ragged-all-to-all imports as it): groups
    and channel sit in its dictionary backend config; grouped like all_to_all."""
    cfg = op.attributes["backend_config"] if "backend_config" in op.attributes else None
    if not isinstance(cfg, ir.DictAttr) or "replica_groups" not in cfg:
        raise KilnError("ragged_all_to_all needs a {replica_groups = ...} backend_config",
                        location=_where(op), hint="write it as lax.ragged_all_to_all does")
    if len(op.operands) != 6 or len(op.results) != 1:
        raise KilnError("ragged_all_to_all takes (input, output, input_offsets, send_sizes, "
                        "output_offsets, recv_sizes) and returns one array", location=_where(op))
    channel = ir.IntegerAttr(cfg["channel_id"]).value if "channel_id" in cfg else 0
    attr = ir.DenseElementsAttr(cfg["replica_groups"])
    rows, cols = ir.RankedTensorType(attr.type).shape
    listed = [[v for v in row if v >= 0] for row in np.array(attr).reshape(rows, cols).tolist()]
    replicas, partitions = G.device_counts(op)
    try:
        groups = G.process_groups(G.mode("all_to_all", channel, False), listed, replicas,
                                  partitions)
    except KilnError as exc:
        exc.location = exc.location or _where(op)
        raise
    if len({len(g) for g in groups}) != 1:
        raise KilnError(f"ragged_all_to_all: replica groups of unequal size {groups}",
                        location=_where(op), hint="every group must have the same size")
    call = _call(op, "ragged_all_to_all", op.operands, [op.results[0].type], {"groups": groups})
    replace_op(op, list(call.results))


def _collective_custom_call(op):
    target = ir.StringAttr(op.attributes["call_target_name"]).value
    if target == "ragged_all_to_all":
        return _ragged_all_to_all(op)
    return _dynamic_root_broadcast(op)


def _outfeed(op):
    call = _call(op, "outfeed", op.operands, [r.type for r in op.results], {})
    replace_op(op, list(call.results))


lower_collectives = pattern_pass({
    "stablehlo.all_reduce": _all_reduce,
    "stablehlo.collective_reduce": _collective_reduce,
    "stablehlo.reduce_scatter": _reduce_scatter,
    "stablehlo.all_gather": _all_gather,
    "stablehlo.all_to_all": _all_to_all,
    "stablehlo.collective_permute": _collective_permute,
    "stablehlo.collective_broadcast": _collective_broadcast,
    "stablehlo.replica_id": _device_id,
    "stablehlo.partition_id": _device_id,
    "stablehlo.send": _send,
    "stablehlo.recv": _recv,
    "stablehlo.infeed": _infeed,
    "stablehlo.outfeed": _outfeed,
    "interpreter.print": _print,
    "interpreter.probe": _probe,
    "stablehlo.custom_call": _collective_custom_call,
})
