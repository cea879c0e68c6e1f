"""Run-time shape agreement, part of kiln-guard-run-time-shapes (bounds_guards.py).

StableHLO accepts a dynamic size (`?`) wherever a static one is expected ("compatible"
shapes), so `add(tensor<?xf32>, tensor<?xf32>)` verifies whatever sizes the operands have at
run time. The lowering sizes the result from one operand and indexes the others with the
same loop bounds: operands of different sizes were read out of bounds, a silent wrong answer.

Each rule below names the dimensions the spec requires to be equal, as groups of
(value, dimension) pairs; a group with at least one dynamic size gets a guard comparing
them all at run time, so a program whose shapes are all static gets no code at all. A
result's size is compared only where it is static: a dynamic result size is computed by the
lowering from the operands, which the group's other members already pin down.
"""
from __future__ import annotations

import re

from torch_mlir import ir

# Ops whose operands and results all have one shape (the spec's SameOperandsAndResultShape /
# elementwise ops). An allowlist: an op missing here gets no guard, never a wrong one.
SAME_SHAPE = frozenset("stablehlo." + name for name in """
    abs add and atan2 cbrt ceil complex compare convert cosine count_leading_zeros divide
    exponential exponential_minus_one floor imag is_finite log log_plus_one logistic map
    maximum minimum multiply negate not or popcnt power real reduce_precision remainder
    round_nearest_afz round_nearest_even rsqrt shift_left shift_right_arithmetic
    shift_right_logical sign sine sort sqrt subtract tan tanh xor""".split())
# Like SAME_SHAPE, but a rank-0 operand is broadcast (select's predicate, clamp's min/max).
SCALAR_BROADCASTING = frozenset({"stablehlo.select", "stablehlo.clamp"})
RULE_OPS = SAME_SHAPE | SCALAR_BROADCASTING | {
    "stablehlo.concatenate", "stablehlo.dot_general", "stablehlo.transpose",
    "stablehlo.reduce", "stablehlo.reduce_window"}

Member = tuple[ir.Value, int, str]   # a value, one of its dimensions, how to name it


def _shape(value: ir.Value) -> list[int] | None:
    return list(value.type.shape) if isinstance(value.type, ir.RankedTensorType) else None


def _names(op: ir.Operation) -> list[tuple[ir.Value, str]]:
    single = len(op.results) == 1
    return ([(v, f"operand {i}") for i, v in enumerate(op.operands)]
            + [(v, "result" if single else f"result {i}") for i, v in enumerate(op.results)])


def equal_groups(op: ir.Operation) -> list[list[Member]]:
    """The groups of dimensions of `op` that the spec requires to be equal."""
    if not all(isinstance(v.type, ir.RankedTensorType) for v in (*op.operands, *op.results)):
        return []   # tokens, tuples or unranked values: no sizes to compare
    if op.name in SAME_SHAPE or op.name in SCALAR_BROADCASTING:
        return _same_shape(op)
    return {"stablehlo.concatenate": _concatenate, "stablehlo.dot_general": _dot_general,
            "stablehlo.transpose": _transpose, "stablehlo.reduce": _reduce,
            "stablehlo.reduce_window": _reduce_window}[op.name](op)


def _same_shape(op: ir.Operation) -> list[list[Member]]:
    rank = len(_shape(op.results[0]) or [])
    values = [(v, n) for v, n in _names(op) if _shape(v) is not None and len(_shape(v)) == rank]
    # Any other rank is a broadcast scalar of select/clamp (the verifier allows nothing else).
    return [[(v, d, n) for v, n in values] for d in range(rank)]


def _concatenate(op: ir.Operation) -> list[list[Member]]:
    axis = ir.IntegerAttr(op.attributes["dimension"]).value
    rank = len(_shape(op.results[0]))
    return [[(v, d, n) for v, n in _names(op)] for d in range(rank) if d != axis]


def _transpose(op: ir.Operation) -> list[list[Member]]:
    permutation = list(ir.DenseI64ArrayAttr(op.attributes["permutation"]))
    operand, result = op.operands[0], op.results[0]
    return [[(operand, p, "operand 0"), (result, i, "result")] for i, p in enumerate(permutation)]


def _reduce(op: ir.Operation) -> list[list[Member]]:
    """The inputs (the first half of the operands; the inits are rank 0) have one shape; each
    result has the inputs' dimensions that are not reduced. The lowering sized every loop
    from input 0: a shorter input was read past its end."""
    count = len(op.results)
    inputs, results = op.operands[:count], op.results
    reduced = set(ir.DenseI64ArrayAttr(op.attributes["dimensions"]))
    kept = [d for d in range(len(_shape(inputs[0]))) if d not in reduced]
    groups = [[(v, d, f"input {i}") for i, v in enumerate(inputs)] for d in kept]
    for at, group in enumerate(groups):
        group += [(r, at, f"result {j}") for j, r in enumerate(results)]
    groups += [[(v, d, f"input {i}") for i, v in enumerate(inputs)] for d in sorted(reduced)]
    return groups


def _reduce_window(op: ir.Operation) -> list[list[Member]]:
    """The inputs have one shape, and so have the results (their sizes: fit_guards.py)."""
    count = len(op.results)
    inputs, results = op.operands[:count], op.results
    rank = len(_shape(inputs[0]))
    return ([[(v, d, f"input {i}") for i, v in enumerate(inputs)] for d in range(rank)]
            + [[(r, d, f"result {j}") for j, r in enumerate(results)] for d in range(rank)])


def _dot_general(op: ir.Operation) -> list[list[Member]]:
    text = str(op.attributes["dot_dimension_numbers"])

    def field(key: str) -> list[int]:
        found = re.search(key + r" = \[([\d, ]*)\]", text)
        return [int(v) for v in found.group(1).split(",") if v.strip()] if found else []

    lhs, rhs, result = op.operands[0], op.operands[1], op.results[0]
    lhs_batch, rhs_batch = field("lhs_batching_dimensions"), field("rhs_batching_dimensions")
    lhs_con, rhs_con = field("lhs_contracting_dimensions"), field("rhs_contracting_dimensions")
    groups = [[(lhs, a, "lhs"), (rhs, b, "rhs"), (result, i, "result")]
              for i, (a, b) in enumerate(zip(lhs_batch, rhs_batch))]
    groups += [[(lhs, a, "lhs"), (rhs, b, "rhs")] for a, b in zip(lhs_con, rhs_con)]
    # The result: batch dimensions, then lhs's free dimensions, then rhs's.
    at = len(lhs_batch)
    for value, name, used in ((lhs, "lhs", lhs_batch + lhs_con), (rhs, "rhs", rhs_batch + rhs_con)):
        for d in range(len(_shape(value))):
            if d not in used:
                groups.append([(value, d, name), (result, at, "result")])
                at += 1
    return groups


def concatenated_sizes(op: ir.Operation) -> tuple[list[Member], Member] | None:
    """concatenate's axis: the operands' sizes add up to a static result size."""
    if op.name != "stablehlo.concatenate" or not all(
            isinstance(v.type, ir.RankedTensorType) for v in (*op.operands, *op.results)):
        return None
    axis = ir.IntegerAttr(op.attributes["dimension"]).value
    return ([(v, axis, n) for v, n in _names(op)[:len(op.operands)]],
            (op.results[0], axis, "result"))


def has_dynamic_operand(op: ir.Operation) -> bool:
    """Whether an operand of `op` is a tensor with a dynamic size: else no guard is needed
    (a guard reads operands; a result's dynamic size is never read)."""
    for value in op.operands:
        vtype = value.type
        if isinstance(vtype, ir.RankedTensorType) and not vtype.has_static_shape:
            return True
    return False


def is_dynamic(member: Member) -> bool:
    value, d, _ = member
    return ir.ShapedType.is_dynamic_size(_shape(value)[d])


def describe(group: list[Member]) -> str:
    return ", ".join(f"dimension {d} of {name}" for _, d, name in group)
