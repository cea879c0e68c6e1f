"""Result shapes of collectives checked against their operands and resolved groups.

StableHLO's verifier can only check a collective's result shape when the replica groups are
written out; when they are absent (HLO's default: every replica) the group size is known
only once kiln-lower-collectives resolves the groups against the device counts. A result
declared with the wrong size would otherwise reach the run-time collective, which cannot
fill it. So every lowering calls `check_result_shapes` with the groups it resolved, and a
mismatch is a located KilnError at compile time.

Only static dimensions are compared: a dynamic one is checked by the run time
(python/kiln/distributed/collectives.py, `expect_shape`).
"""
from __future__ import annotations

from torch_mlir import ir

from ...errors import KilnError


def _dims(value_type: ir.Type) -> list[int | None]:
    t = ir.RankedTensorType(value_type)
    return [None if t.is_dynamic_dim(i) else t.shape[i] for i in range(t.rank)]


def _group_size(op: ir.Operation, groups: list[list[int]]) -> int:
    sizes = {len(g) for g in groups}
    if len(sizes) != 1:
        raise KilnError(f"{op.name}: replica groups of unequal size {groups}",
                        location=str(op.location),
                        hint="the result shape depends on the group size, so every group "
                             "must have the same size")
    return sizes.pop()


def _expected(kind: str, operand: list, attrs: dict, count: int) -> list:
    """The result dims `kind` produces from `operand` in groups of `count` (None: unknown)."""
    out = list(operand)
    if kind == "all_gather":
        d = attrs["dim"]
        out[d] = None if out[d] is None else out[d] * count
    elif kind == "reduce_scatter":
        d = attrs["dim"]
        if out[d] is not None and out[d] % count:
            return ["indivisible", d]
        out[d] = None if out[d] is None else out[d] // count
    elif kind == "all_to_all":
        split, concat = attrs["split_dim"], attrs["concat_dim"]
        if out[split] is not None and out[split] % count:
            return ["indivisible", split]
        out[split] = None if out[split] is None else out[split] // count
        out[concat] = None if out[concat] is None else out[concat] * count
    return out


_RULE = {"all_gather": "operand dimension {dim} x group size {count}",
         "reduce_scatter": "operand dimension {dim} / group size {count}",
         "all_to_all": "split dimension / {count}, concat dimension x {count}"}


def check_result_shapes(op: ir.Operation, kind: str, groups: list[list[int]],
                        **attrs) -> None:
    """Raise a located KilnError when a static result dimension of `op` (a collective lowered
    as `kind` over `groups`) differs from what its operand and group size give. Kinds not in
    _RULE (all_reduce, collective_permute, collective_broadcast...) keep the operand's shape."""
    count = _group_size(op, groups) if kind in _RULE else 1
    for i, (operand, result) in enumerate(zip(op.operands, op.results)):
        have, given = _dims(operand.type), _dims(result.type)
        where = f"result {i}" if len(op.results) > 1 else "the result"
        if len(have) != len(given):
            raise KilnError(f"{op.name}: {where} has rank {len(given)}, its operand rank "
                            f"{len(have)}", location=str(op.location),
                            hint="a collective keeps its operand's rank")
        want = _expected(kind, have, attrs, count)
        if want and want[0] == "indivisible":
            raise KilnError(f"{op.name}: operand dimension {want[1]} of size {have[want[1]]} "
                            f"does not split into {count} equal parts (groups {groups})",
                            location=str(op.location),
                            hint="the split dimension must be a multiple of the group size")
        if any(w is not None and g is not None and w != g for w, g in zip(want, given)):
            rule = _RULE.get(kind, "the operand's shape").format(count=count, **attrs)
            shown = "x".join("?" if w is None else str(w) for w in want)
            raise KilnError(f"{op.name}: {where} is declared {result.type}, but groups "
                            f"{groups} give {shown} ({rule})", location=str(op.location),
                            hint="declare the result shape the replica groups produce, or "
                                 "fix the replica_groups")
