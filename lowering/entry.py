"""Entry-point preparation: one public function, the rest private so inlining and symbol DCE
fold the program into it."""
from __future__ import annotations

from torch_mlir import ir

from .ir_util import body_block, find_entry, function_type, functions, set_results
from ..dialects import kiln as names


def make_entry_only_public(module: ir.Module, entry: str | None) -> None:
    main = find_entry(module, entry)
    for func in functions(module):
        if func != main and len(func.regions[0].blocks):
            func.attributes["sym_visibility"] = ir.StringAttr.get("private")


def emit_c_interface(module: ir.Module, entry: str | None) -> None:
    """Give the entry a C interface and mark its arguments read-only: they are the caller's
    numpy arrays, so an in-place update (scatter, dynamic_update_slice...) must work on a copy."""
    func = find_entry(module, entry)
    func.attributes["llvm.emit_c_interface"] = ir.UnitAttr.get()
    count = len(function_type(func).inputs)
    old = list(ir.ArrayAttr(func.attributes["arg_attrs"])) if "arg_attrs" in func.attributes \
        else [ir.DictAttr.get({})] * count
    read_only = ir.BoolAttr.get(False)
    new = []
    for attrs in old:
        entries = {a.name: a.attr for a in ir.DictAttr(attrs)}
        entries["bufferization.writable"] = read_only
        new.append(ir.DictAttr.get(entries))
    func.attributes["arg_attrs"] = ir.ArrayAttr.get(new)


RESULT_SOURCES_ATTR = names.RESULT_SOURCES


def dedupe_results(module: ir.Module, entry: str | None) -> None:
    """Return each distinct value once. The caller owns one buffer per result, and a buffer
    returned twice cannot become two out-parameters; the runtime copies duplicates instead,
    following `kiln.result_sources` (result i is a copy of compiled result sources[i])."""
    func = find_entry(module, entry)
    block = body_block(func)
    ret = block.operations[len(block.operations) - 1].operation
    unique: list[ir.Value] = []
    sources: list[int] = []
    for value in ret.operands:
        for i, seen in enumerate(unique):
            if seen == value:
                sources.append(i)
                break
        else:
            sources.append(len(unique))
            unique.append(value)
    if len(unique) == len(sources):
        return
    set_results(func, unique)
    func.attributes[RESULT_SOURCES_ATTR] = ir.DenseI64ArrayAttr.get(sources)


def read_result_sources(func: ir.Operation) -> list[int] | None:
    if RESULT_SOURCES_ATTR not in func.attributes:
        return None
    return list(ir.DenseI64ArrayAttr(func.attributes[RESULT_SOURCES_ATTR]))


def copy_repeated_results(module: ir.Module, entry: str | None) -> None:
    """Return a copy wherever the entry returns one value twice. `dedupe_results` already
    merged values that were equal in StableHLO, but legalization can make two of them equal
    later (`convert` s32->s8 and s32->u8 are one `arith.trunci` once integers are signless),
    and `buffer-results-to-out-params` crashes on a buffer returned twice."""
    from torch_mlir.dialects import linalg, tensor
    func = find_entry(module, entry)
    block = body_block(func)
    ret = block.operations[len(block.operations) - 1].operation
    seen: set = set()
    operands = list(ret.operands)
    for i, value in enumerate(operands):
        key = value  # ir.Value compares and hashes by identity of the underlying value
        if key in seen:
            ranked = ir.RankedTensorType(value.type)
            with ir.InsertionPoint(ret), ret.location:
                empty = tensor.EmptyOp(ranked.shape, ranked.element_type).result
                ret.operands[i] = linalg.copy(value, outs=[empty])
        seen.add(key)
