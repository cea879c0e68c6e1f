"""Specialising the imported module to one call's argument shapes, as its calling convention
says: with JAX's dimension arguments told from the shapes (lowering/shapes.py), or by plain
StableHLO shape refinement when the entry computes its dimension variables itself."""
from __future__ import annotations

from torch_mlir import ir

from ..frontend.convention import CallingConvention
from ..lowering.shapes import specialize
from ..pipeline import run_steps

# The entry (JAX's wrapping @main) computes the dimension variables from its arguments'
# shapes; giving it concrete argument types and refining folds every shape computation.
_REFINE_ONLY = ["stablehlo-refine-shapes", "func.func(stablehlo-canonicalize-dynamism)",
                "stablehlo-refine-shapes", "canonicalize"]


def specialize_to(module: ir.Module, entry: str, arg_types: list[str], filename: str,
                  convention: CallingConvention) -> dict[int, int]:
    """Give the entry `arg_types` and propagate them. Returns the values the shapes imply for
    JAX's dimension arguments (index -> value), which the caller must check, since the
    compiled code no longer reads them."""
    if convention.infer_dimension_arguments:
        with module.context:
            return specialize(module, entry, arg_types, filename)
    types = ",".join(arg_types)
    run_steps(module, [f"stablehlo-refine-arguments{{types={types}}}", *_REFINE_ONLY],
              filename, "specialize")
    return {}
