"""Conformance checks (`check.*` ops and `check.*` custom calls) become extra entry results.

The compiled program then only computes; Python compares the extra results after the call
(runtime/checks.py), so a check costs no runtime support in the JIT and can name the failing
element. The list of checks travels with the IR as the entry's `kiln.checks` attribute.
"""
from __future__ import annotations

import json

from torch_mlir import ir

from ..dialects import check as check_dialect
from ..dialects import kiln as names
from ..errors import KilnError
from .ir_util import body_block, find_entry, function_type, set_results, walk

CHECKS_ATTR = names.CHECKS
USER_RESULTS_ATTR = names.USER_RESULTS

# Kinds Kiln evaluates; `_const` kinds compare against their `value` attribute.
KINDS = {"expect_eq", "expect_almost_eq", "expect_close", "eq", "expect_eq_const",
         "expect_almost_eq_const", "expect_true", "expect_false", "expect_serialized_eq"}
_NUMERIC_ATTRS = ("tolerance", "max_ulp_difference", "min_ulp_difference")


def check_kind(op: ir.Operation) -> str | None:
    if op.name == "stablehlo.custom_call":
        target = ir.StringAttr(op.attributes["call_target_name"]).value
    elif op.name.startswith("check."):
        target = op.name
    else:
        return None
    return target[len("check."):] if target.startswith("check.") else None


def _numeric_attr(attr: ir.Attribute) -> float:
    for kind in (ir.IntegerAttr, ir.FloatAttr):
        try:
            return kind(attr).value
        except ValueError:
            pass
    raise ValueError(attr)


_ULP_ATTRS = ("max_ulp_difference", "min_ulp_difference")


def _ulp_limit(op: ir.Operation, name: str, kind: str) -> int:
    """A ULP bound as the reference reads it: an unsigned 64-bit integer (CheckOps.td's
    UI64Attr), so the bits of `18446744073709551615 : i64` (what Kiln's i64 form parses it
    to) mean 2^64-1, not -1."""
    where = str(op.location)
    try:
        attr = ir.IntegerAttr(op.attributes[name])
        width = ir.IntegerType(attr.type).width
    except ValueError:
        raise KilnError(f"check.{kind}: {name} must be an integer, not {op.attributes[name]}",
                        location=where) from None
    value = attr.value % (1 << width)  # its bits, unsigned
    if value >= 1 << 64:
        raise KilnError(f"check.{kind}: {name} = {value} does not fit in 64 bits",
                        location=where, hint="ULP bounds are unsigned 64-bit integers")
    return value


def outline_checks(module: ir.Module, entry: str | None) -> None:
    func = find_entry(module, entry)
    block = body_block(func)
    user_results = len(function_type(func).results)
    ret = block.operations[len(block.operations) - 1].operation
    results = list(ret.operands)
    checks = []
    for op in list(walk(func)):
        kind = check_kind(op)
        if kind is None:
            continue
        where = str(op.location)
        if kind not in KINDS:
            raise KilnError(f"unknown check 'check.{kind}'", location=where,
                            hint="Kiln evaluates: " + ", ".join(sorted(KINDS)))
        if op.parent.name != "func.func":
            raise KilnError(f"check.{kind} inside a region is not supported", location=where,
                            hint="place checks at the top level of the entry function")
        operands = list(op.operands)
        if kind.endswith("_const"):
            operands.append(check_dialect.expected_value(op).result)
        if len(op.results):
            # `check.eq` yields its verdict; the verdict is enforced after the call instead.
            with ir.InsertionPoint(op), op.location:
                true = ir.Operation.create(
                    "stablehlo.constant", results=[op.results[0].type],
                    attributes={"value": ir.DenseElementsAttr.get_splat(
                        op.results[0].type, ir.BoolAttr.get(True))})
            op.results[0].replace_all_uses_with(true.result)
            # `results` holds Values read before: the verdict returned must not dangle once the
            # check op is erased (that crashed the process).
            results = [true.result if r == op.results[0] else r for r in results]
        attrs = {n: _numeric_attr(op.attributes[n]) for n in _NUMERIC_ATTRS if n in op.attributes}
        for name in _ULP_ATTRS:
            if name in op.attributes:
                attrs[name] = _ulp_limit(op, name, kind)
        if kind == "expect_serialized_eq":
            # compared after the call with what `interpreter.probe` recorded (collectives.py)
            attrs["probe_id"] = ir.StringAttr(op.attributes["probe_id"]).value
            attrs["iter"] = int(_numeric_attr(op.attributes["iter"])) if "iter" in op.attributes else 0
        checks.append({"kind": kind, "results": list(range(len(results), len(results) + len(operands))),
                       "loc": where, "custom_call": op.name == "stablehlo.custom_call", **attrs})
        results.extend(operands)
        op.erase()
    if not checks:
        return
    set_results(func, results)
    func.attributes[CHECKS_ATTR] = ir.StringAttr.get(json.dumps(checks))
    func.attributes[USER_RESULTS_ATTR] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), user_results)


def read_checks(func: ir.Operation) -> tuple[list[dict], int | None]:
    if CHECKS_ATTR not in func.attributes:
        return [], None
    return (json.loads(ir.StringAttr(func.attributes[CHECKS_ATTR]).value),
            ir.IntegerAttr(func.attributes[USER_RESULTS_ATTR]).value)
