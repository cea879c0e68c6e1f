"""Small helpers over the MLIR Python bindings shared by Kiln's passes."""
from __future__ import annotations

import numpy as np
from torch_mlir import ir

from ..errors import KilnError


def functions(module: ir.Module) -> list[ir.Operation]:
    return [op.operation for op in module.body.operations if op.operation.name == "func.func"]


def symbol_name(func: ir.Operation) -> str:
    return ir.StringAttr(func.attributes["sym_name"]).value


def is_public(func: ir.Operation) -> bool:
    return "sym_visibility" not in func.attributes or \
        ir.StringAttr(func.attributes["sym_visibility"]).value == "public"


def find_entry(module: ir.Module, entry: str | None) -> ir.Operation:
    """The function to run: `entry` if given, else `main`, else the only public function."""
    funcs = functions(module)
    by_name = {symbol_name(f): f for f in funcs}
    if entry is not None:
        if entry not in by_name:
            raise KilnError(f"no function named '{entry}'",
                            hint="functions in the module: " + (", ".join(by_name) or "none"))
        return by_name[entry]
    if "main" in by_name:
        return by_name["main"]
    public = [f for f in funcs if is_public(f)]
    if len(public) == 1:
        return public[0]
    raise KilnError("cannot tell which function is the entry point",
                    hint="pass entry=NAME (CLI: --entry NAME); public functions: "
                         + (", ".join(symbol_name(f) for f in public) or "none"))


def function_type(func: ir.Operation) -> ir.FunctionType:
    return ir.FunctionType(ir.TypeAttr(func.attributes["function_type"]).value)


def body_block(func: ir.Operation) -> ir.Block:
    return func.regions[0].blocks[0]


def set_results(func: ir.Operation, values: list[ir.Value]) -> None:
    """Replace the function's terminator operands (single-block functions) and its type."""
    block = body_block(func)
    ret = block.operations[len(block.operations) - 1].operation
    with ir.InsertionPoint(ret), ret.location:
        ir.Operation.create("func.return", operands=values)
    ret.erase()
    old = function_type(func)
    func.attributes["function_type"] = ir.TypeAttr.get(
        ir.FunctionType.get(old.inputs, [v.type for v in values]))
    if "res_attrs" in func.attributes:
        old_attrs = list(ir.ArrayAttr(func.attributes["res_attrs"]))
        extra = [ir.DictAttr.get({})] * (len(values) - len(old_attrs))
        func.attributes["res_attrs"] = ir.ArrayAttr.get(old_attrs[:len(values)] + extra)


def operand_segments(op: ir.Operation) -> tuple[int, int]:
    """How many inputs and outputs a linalg structured op (generic, fill...) has."""
    sizes = list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))
    return sizes[0], sizes[1]


def all_parallel(op: ir.Operation) -> bool:
    """Whether every loop of a linalg.generic is parallel (no reduction)."""
    return all("parallel" in str(t) for t in ir.ArrayAttr(op.attributes["iterator_types"]))


def walk(op: ir.Operation):
    """Every operation nested in `op` (pre-order), as ir.Operation."""
    for region in op.regions:
        for block in region.blocks:
            for child in block.operations:
                child = child.operation
                yield child
                yield from walk(child)


def constant_int(value: ir.Value) -> int | None:
    """The value of an integer or index `arith.constant` defining `value`, else None (a loop
    bound or step known at compile time)."""
    if not isinstance(value, ir.OpResult) or value.owner.operation.name != "arith.constant":
        return None
    try:
        return ir.IntegerAttr(value.owner.operation.attributes["value"]).value
    except ValueError:
        return None


def clone_ops(ops, mapping: dict, ip: ir.InsertionPoint) -> None:
    """Clone `ops` in order at `ip`, reading `mapping`'s values in place of its keys (in nested
    regions too); each clone's results join `mapping` in place of the originals'."""
    for o in ops:
        new = o.clone(ip)
        _remap(new, mapping)
        for old, fresh in zip(o.results, new.results):
            mapping[old] = fresh


def _remap(op: ir.Operation, mapping: dict) -> None:
    for i, v in enumerate(op.operands):
        if v in mapping:
            op.operands[i] = mapping[v]
    for r in op.regions:
        for b in r.blocks:
            for c in b.operations:
                _remap(c.operation, mapping)


def constant_ints(value: ir.Value) -> list[int] | None:
    """The entries, in row-major order, of `value` if a `stablehlo.constant` or
    `arith.constant` of integers defines it (a shape or window operand), else None."""
    owner = value.owner if isinstance(value, ir.OpResult) else None
    if owner is None or owner.operation.name not in ("stablehlo.constant", "arith.constant"):
        return None
    attr = owner.operation.attributes["value"]
    if not isinstance(attr, ir.DenseIntElementsAttr):
        return None
    return [int(v) for v in np.array(attr).reshape(-1)]
