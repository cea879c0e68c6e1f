"""Each distinct kernel is compiled once: internal functions with the same code are merged.

Kiln outlines loop bodies run on all cores (`kiln_parallel_body_N`, codegen/parallel.py) and
the gemm calls of products and convolutions (`kiln_gemm_N`, codegen/blas.py) into functions
of their own, one per op. A model repeats its blocks with the same shapes, so many of these
functions are the same code under another name (ResNet50: 41 of its 127 outlined functions).
LLVM would optimize and generate code for each copy; here the copies are removed, every use
(calls and the function pointers passed to kiln_parallel_for) refers to the first of them.

Two functions are merged only when their printed forms are the same except for their names:
the same signature, attributes and body, op for op.
"""
from __future__ import annotations

from torch_mlir import ir

_MERGEABLE_LINKAGES = ("#llvm.linkage<internal>", "#llvm.linkage<private>")


def dedupe_kernels(module: ir.Module) -> int:
    """Merge internal llvm.funcs with identical code; returns how many were removed."""
    first_by_code: dict[str, str] = {}
    duplicates: list[tuple[ir.Operation, str, str]] = []  # (function, its name, kept name)
    for op in module.body.operations:
        op = op.operation
        if op.name != "llvm.func" or not len(op.regions[0].blocks):
            continue
        if "linkage" not in op.attributes or \
                str(op.attributes["linkage"]) not in _MERGEABLE_LINKAGES:
            continue  # visible outside the module: its symbol must stay
        name = ir.StringAttr(op.attributes["sym_name"]).value
        code = _code_without_name(op, name)
        kept = first_by_code.setdefault(code, name)
        if kept != name:
            duplicates.append((op, name, kept))
    if not duplicates:
        return 0
    with module.context:
        _refer_to_kept({name: kept for _, name, kept in duplicates}, module)
        for func, _, _ in duplicates:
            func.erase()
    return len(duplicates)


# The ops of the lowered module that name a function, and the attribute that does.
_SYMBOL_USES = {"llvm.call": "callee", "llvm.mlir.addressof": "global_name"}


def _refer_to_kept(kept_for: dict[str, str], module: ir.Module) -> None:
    """Make every call and function address name the kept function instead of its copy, in
    one walk of the module (SymbolTable.replace_all_symbol_uses walks it once per name)."""
    def visit(op: ir.Operation) -> ir.WalkResult:
        attribute = _SYMBOL_USES.get(op.name)
        if attribute is not None and attribute in op.attributes:
            kept = kept_for.get(ir.FlatSymbolRefAttr(op.attributes[attribute]).value)
            if kept is not None:
                op.attributes[attribute] = ir.FlatSymbolRefAttr.get(kept)
        return ir.WalkResult.ADVANCE
    module.operation.walk(visit)


def _code_without_name(func: ir.Operation, name: str) -> str:
    """The function's printed form with its own name blanked (a function that refers to
    itself keeps that reference, so it only merges with an exact copy of itself)."""
    # Local scope: printed alone, not by numbering the whole module's values first (which
    # `str` does, and costs a print of the module per function).
    text = func.get_asm(use_local_scope=True, assume_verified=True)
    return text.replace(f"@{name}(", "@(", 1)


def run(module: ir.Module) -> None:
    dedupe_kernels(module)
