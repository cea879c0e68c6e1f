"""The entry's C-interface wrapper absorbs the entry, so LLVM never sees a call with thousands
of arguments.

convert-func-to-llvm lowers the entry `@f` with every memref argument expanded into its
descriptor's fields (pointer, pointer, offset, sizes, strides) and makes `@_mlir_ciface_f`,
which loads each descriptor and calls `@f` with all of them. A model whose weights are
arguments has hundreds of them: ResNet50's 321 arguments are a call with 1,937 operands, all but
six passed on the stack. LLVM's instruction selection tries to merge every pair of those stack
stores (DAGCombiner's store merging is quadratic in the stores that share a chain): 52 of
ResNet50's 56 seconds of LLVM time, measured with perf on 2026-11-27.

Here `@f` becomes internal and always-inline: LLVM's inliner folds it into the wrapper (the only
caller Kiln makes: the runtime calls the wrapper's packed form), the expanded call disappears,
and `@f` with it. The code is the same otherwise: the wrapper's loads feed the body directly.
"""
from __future__ import annotations

from torch_mlir import ir

C_INTERFACE_PREFIX = "_mlir_ciface_"


def inline_entry_into_c_interface(module: ir.Module) -> None:
    """Mark every function that a C-interface wrapper wraps internal and always-inline."""
    defined = {}
    wrapped = []
    for op in module.body.operations:
        op = op.operation
        if op.name != "llvm.func" or not len(op.regions[0].blocks):
            continue
        name = ir.StringAttr(op.attributes["sym_name"]).value
        defined[name] = op
        if name.startswith(C_INTERFACE_PREFIX):
            wrapped.append(name[len(C_INTERFACE_PREFIX):])
    for name in wrapped:
        func = defined.get(name)
        if func is None:
            continue  # a wrapper of an external declaration: nothing to inline
        with module.context:
            func.attributes["linkage"] = ir.Attribute.parse("#llvm.linkage<internal>")
            func.attributes["always_inline"] = ir.UnitAttr.get()
