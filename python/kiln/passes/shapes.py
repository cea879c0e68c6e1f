"""Specialising a dynamic-shape program to the shapes it is called with."""
from __future__ import annotations

from torch_mlir import ir

from ..pipeline import run_steps
from .ir_util import find_entry, symbol_name


def specialize(module: ir.Module, entry: str, arg_types: list[str], filename: str) -> None:
    """Give the entry the concrete argument types and propagate them through the program."""
    func = find_entry(module, entry)
    if symbol_name(func) != "main":
        # stablehlo-refine-arguments works on @main only.
        func.attributes["sym_name"] = ir.StringAttr.get("main")
    types = ",".join(arg_types)
    run_steps(module, [
        f"stablehlo-refine-arguments{{types={types}}}",
        "stablehlo-refine-shapes",
        "func.func(stablehlo-canonicalize-dynamism)",
        "stablehlo-refine-shapes",
        "canonicalize",
    ], filename, "specialize")
    if symbol_name(func) != entry:
        func.attributes["sym_name"] = ir.StringAttr.get(entry)
