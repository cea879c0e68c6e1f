"""Entry-point preparation: one public function, the rest private so inlining and symbol DCE
fold the program into it."""
from __future__ import annotations

from torch_mlir import ir

from .ir_util import body_block, find_entry, functions, set_results


def make_entry_only_public(module: ir.Module, entry: str | None) -> None:
    main = find_entry(module, entry)
    for func in functions(module):
        if func != main and len(func.regions[0].blocks):
            func.attributes["sym_visibility"] = ir.StringAttr.get("private")


def emit_c_interface(module: ir.Module, entry: str | None) -> None:
    find_entry(module, entry).attributes["llvm.emit_c_interface"] = ir.UnitAttr.get()


RESULT_SOURCES_ATTR = "kiln.result_sources"


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
