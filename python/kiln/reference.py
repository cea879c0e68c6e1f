"""The StableHLO reference interpreter as an oracle for programs that carry no checks."""
from __future__ import annotations

import numpy as np
from torch_mlir import ir
from torch_mlir._mlir_libs import _stablehlo

from .context import make_context
from .errors import KilnError


def _to_attr(array: np.ndarray, mlir_type: str) -> ir.Attribute:
    t = ir.RankedTensorType(ir.Type.parse(mlir_type))
    return ir.DenseElementsAttr.get(np.ascontiguousarray(array), type=t)


def evaluate(module_text: str, args: list[np.ndarray], arg_types: list[str]) -> list[np.ndarray]:
    """Run `module_text`'s @main on `args` in the reference interpreter."""
    ctx = make_context()
    with ctx:
        module = ir.Module.parse(module_text)
        attrs = [_to_attr(a, t) for a, t in zip(args, arg_types)]
        try:
            results = _stablehlo.eval_module(module, attrs)
        except Exception as exc:  # the interpreter reports failures as plain exceptions
            raise KilnError(f"reference interpreter failed: {str(exc).splitlines()[0][:300]}") from None
        return [np.array(r) for r in results]
