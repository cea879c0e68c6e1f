"""The layouts of the entry's parameters and results at the runtime boundary: read from the
imported module (where a compile worker reads them, driver/front.py, or the caller) and
applied to the arrays at every call (driver/executable.py)."""
from __future__ import annotations

import functools

import numpy as np
from torch_mlir import ir

from ..diagnostics import format_location
from ..layout import Layout


class EntryLayouts:
    """The layouts of the entry's parameters and results at the runtime boundary.

    Callers pass and get *logical* arrays (JAX's view: a layout is where elements live, not
    what the value is). The `layout` stage compiles a parameter or result with a non-default
    layout as its physical array (lowering/layouts.py), so each such argument is converted
    to the buffer XLA would hold, and each such result back to the logical array: a view
    whose strides follow a permutation layout ({0,1}: column-major memory), a copy in the
    layout's dimension order for a tiled one (numpy strides cannot express tiles).
    """

    def __init__(self, params: list[str | None], results: list[tuple[str, list[int] | None] | None]):
        self.params = params      # layout text per parameter; None: stored row-major
        self.results = results    # (layout text, logical dims if static) per result

    @staticmethod
    def read(func: ir.Operation, filename: str) -> "EntryLayouts":
        """The layouts the imported entry function asks for (kiln.layout, mhlo.layout_mode),
        decided as `kiln-layout-assignment` decides them and kept where
        `kiln-layout-normalization` makes the compiled value physical."""
        from ..lowering.ir_util import function_type, symbol_name
        from ..lowering.layouts import requested_layout
        ftype, name = function_type(func), symbol_name(func)
        where = format_location(func.location, filename)

        def converted(key: str, types, what: str) -> list[tuple[str, list[int] | None] | None]:
            dicts = ([{a.name: a.attr for a in ir.DictAttr(d)} for d in ir.ArrayAttr(func.attributes[key])]
                     if key in func.attributes else [{} for _ in types])
            found = []
            for i, (attrs, t) in enumerate(zip(dicts, types)):
                layout = requested_layout(attrs, t, f"{what} {i} of @{name}", where)
                # Tiled layouts need static shapes (requested_layout checks), so a dynamic
                # shape here has a permutation layout, whose physical order needs no sizes.
                dims = list(ir.RankedTensorType(t).shape) if layout is not None else []
                if layout is None or layout.stores_row_major(dims):
                    found.append(None)
                else:
                    static = ir.RankedTensorType(t).has_static_shape
                    found.append((str(layout), dims if static else None))
            return found
        params = [p[0] if p else None for p in converted("arg_attrs", ftype.inputs, "argument")]
        return EntryLayouts(params, converted("res_attrs", ftype.results, "result"))

    def to_json(self) -> dict:
        return {"params": self.params, "results": [list(r) if r else None for r in self.results]}

    @staticmethod
    def from_json(data: dict) -> "EntryLayouts":
        return EntryLayouts(list(data["params"]), [tuple(r) if r else None for r in data["results"]])

    def physical_arguments(self, arrays: list[np.ndarray]) -> list[np.ndarray]:
        """The buffers the compiled entry takes for the logical `arrays`."""
        if not any(self.params):
            return arrays  # every parameter row-major: the arrays as they are
        out = []
        for array, text in zip(arrays, self.params + [None] * len(arrays)):
            layout = _parsed_layout(text) if text else None
            if layout is not None and not layout.stores_row_major(array.shape):
                array = layout.to_physical(array)
            out.append(array)
        return out

    def logical_results(self, buffers: list[np.ndarray]) -> list[np.ndarray]:
        """The logical arrays the compiled entry's result `buffers` hold."""
        if not any(self.results):
            return buffers
        out = []
        for buffer, result in zip(buffers, self.results + [None] * len(buffers)):
            if result is not None:
                layout, dims = _parsed_layout(result[0]), result[1]
                if dims is None:  # a permutation: the logical dims are the physical ones, reordered
                    dims = [buffer.shape[layout.major_to_minor.index(k)] for k in range(buffer.ndim)]
                buffer = layout.to_logical(buffer, dims)
            out.append(buffer)
        return out


@functools.lru_cache(maxsize=256)
def _parsed_layout(text: str) -> Layout:
    return Layout.parse(text)
