"""The host function after kernel outlining, read as the GPU execution plan.

What is left on the host after `gpu-kernel-outlining` is straight-line code over buffers:
allocations, constants (memref.get_global), views (reshapes, subviews: metadata only),
contiguous copies and kernel launches. Reading it once at compile time gives the plan as
plain data (JSON): the runtime (kiln.runtime.gpu_plan) replays it through the same
interface on a real GPU (CUDA driver) and in the emulator.

Every memref value is (root buffer, element offset, sizes, strides): its static type gives
all but the root. A kernel receives each memref argument as MLIR's expanded descriptor
(allocated pointer, aligned pointer, offset, sizes..., strides...), the convention
`convert-gpu-to-nvvm` gives kernel parameters.
"""
from __future__ import annotations

import base64

import ml_dtypes
import numpy as np
from torch_mlir import ir

from ...errors import KilnError
from ..ir_util import find_entry

# Ops that only give another view of their first operand's buffer.
VIEW_OPS = frozenset({"memref.collapse_shape", "memref.expand_shape", "memref.cast",
                      "memref.reinterpret_cast", "memref.subview"})
# Pure host arithmetic whose results no kernel reads: skipped.
_IGNORED = ("arith.", "affine.apply", "index.", "complex.", "math.")
_HINT = ("the GPU target runs straight-line programs of kernels; `kiln-opt FILE --target gpu "
         "--stage gpu-map` shows the host function")


INPUTS_ATTR = "kiln.gpu.inputs"


def count_inputs(module: ir.Module, entry: str | None = None) -> None:
    """Record on the entry how many of its parameters are inputs, before bufferization
    appends the results as out-parameters: only those are copied back to the host."""
    func = find_entry(module, entry)
    count = len(ir.FunctionType(ir.TypeAttr(func.attributes["function_type"]).value).inputs)
    func.attributes[INPUTS_ATTR] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), count)


def check_host(module: ir.Module, entry: str | None = None) -> None:
    """Raise a located KilnError for anything in the host function the plan cannot run."""
    # only after kernel outlining (a module holding gpu.modules): before, nothing to check
    if any(op.operation.name == "gpu.module" for op in module.body.operations):
        read_plan(module, entry)


def element_bytes(t: ir.Type) -> int:
    text = str(t)
    if text == "index":
        return 8
    if text.startswith("complex<"):
        return 2 * element_bytes(ir.ComplexType(t).element_type)
    for kind in (ir.IntegerType, ir.FloatType):
        try:
            return max(1, (kind(t).width + 7) // 8)
        except ValueError:
            pass
    raise KilnError(f"the GPU target has no buffers of {t}", hint="supported element types: "
                    "integers, floats, complex")


def memref_layout(t: ir.MemRefType, where: str) -> dict:
    """The static (offset, sizes, strides) of a memref type, in elements."""
    if t.has_static_shape and 0 in t.shape:  # no elements: any layout will do
        return {"offset": 0, "sizes": list(t.shape), "strides": _row_major(list(t.shape)),
                "element": str(t.element_type), "element_bytes": element_bytes(t.element_type)}
    strides, offset = t.get_strides_and_offset()
    dynamic = ir.ShapedType.get_dynamic_stride_or_offset()
    if not t.has_static_shape or offset == dynamic or any(s == dynamic for s in strides):
        raise KilnError(f"buffer {t} has a dynamic shape or layout", location=where,
                        hint="the GPU target compiles static shapes (give --arg-shapes)")
    return {"offset": offset, "sizes": list(t.shape), "strides": list(strides),
            "element": str(t.element_type), "element_bytes": element_bytes(t.element_type)}


def read_plan(module: ir.Module, entry: str | None) -> dict:
    """The plan of the entry function (see the module doc): JSON-ready."""
    func = find_entry(module, entry)
    entry = ir.StringAttr(func.attributes["sym_name"]).value
    block = func.regions[0].blocks[0]
    names: dict = {}       # ir.Value -> value id
    memrefs: dict = {}     # value id -> {"root": id, **layout}
    buffers: dict = {}     # root id -> bytes
    steps: list[dict] = []

    def new(value: ir.Value) -> int:
        names[value] = len(names)
        return names[value]

    def root_bytes(layout: dict) -> int:
        return int(np.prod(layout["sizes"], dtype=np.int64)) * layout["element_bytes"] \
            if layout["sizes"] else layout["element_bytes"]

    params = []
    for arg in block.arguments:
        where = f"argument {arg.arg_number} of @{entry}"
        try:
            t = ir.MemRefType(arg.type)
        except ValueError:
            raise KilnError(f"{where} has type {arg.type}", location=where, hint=_HINT) from None
        vid = new(arg)
        layout = memref_layout(t, where)
        memrefs[vid] = {"root": vid, **layout}
        buffers[vid] = root_bytes(layout)
        params.append(vid)
    scalars: dict[int, dict] = {}
    for op in block.operations:
        op = op.operation
        where = str(op.location)
        name = op.name
        if name == "func.return":
            if len(op.operands):
                raise KilnError("the entry still returns buffers", location=where, hint=_HINT)
        elif name in ("memref.alloc", "memref.alloca"):
            vid = new(op.result)
            layout = memref_layout(ir.MemRefType(op.result.type), where)
            memrefs[vid] = {"root": vid, **layout}
            buffers[vid] = root_bytes(layout)
            steps.append({"op": "alloc", "id": vid, "bytes": buffers[vid]})
        elif name == "memref.get_global":
            vid = new(op.result)
            layout = memref_layout(ir.MemRefType(op.result.type), where)
            memrefs[vid] = {"root": vid, **layout}
            data = _global_bytes(module, ir.FlatSymbolRefAttr(op.attributes["name"]).value,
                                 layout, where)
            buffers[vid] = len(data)
            steps.append({"op": "upload", "id": vid, "bytes": len(data),
                          "data": base64.b64encode(data).decode()})
        elif name in VIEW_OPS:
            source = memrefs[names[op.operands[0]]]
            vid = new(op.result)
            memrefs[vid] = {"root": source["root"],
                            **memref_layout(ir.MemRefType(op.result.type), where)}
        elif name == "memref.dealloc":
            pass  # every temporary is freed when the call ends
        elif name == "memref.copy":
            src, dst = (memrefs[names[v]] for v in op.operands)
            for m in (src, dst):
                if m["strides"] != _row_major(m["sizes"]):
                    raise KilnError("a strided memref.copy reached the host", location=where,
                                    hint="kiln-copies-as-loops should have made it a kernel")
            steps.append({"op": "copy", "src": src["root"], "dst": dst["root"],
                          "src_offset": src["offset"] * src["element_bytes"],
                          "dst_offset": dst["offset"] * dst["element_bytes"],
                          "bytes": root_bytes(src)})
        elif name == "complex.constant":
            vid = new(op.result)
            parts = [ir.FloatAttr(a).value for a in ir.ArrayAttr(op.attributes["value"])]
            scalars[vid] = {"type": str(op.result.type), "value": parts}
        elif name == "arith.constant":
            vid = new(op.result)
            scalars[vid] = _scalar(op, where)
        elif name == "gpu.launch_func":
            steps.append(_launch(op, names, memrefs, scalars, where))
        elif name.startswith(_IGNORED) and not op.regions:
            for result in op.results:
                new(result)
        else:
            raise KilnError(f"'{name}' cannot run on the host of the GPU target",
                            location=where, hint=_HINT)
    inputs = ir.IntegerAttr(func.attributes[INPUTS_ATTR]).value \
        if INPUTS_ATTR in func.attributes else 0
    return {"entry": ir.StringAttr(func.attributes["sym_name"]).value, "params": params,
            "inputs": inputs,
            "buffers": {str(k): v for k, v in buffers.items()},
            "memrefs": {str(k): v for k, v in memrefs.items()}, "steps": steps}


def _row_major(sizes: list[int]) -> list[int]:
    strides, step = [], 1
    for n in reversed(sizes):
        strides.insert(0, step)
        step *= n
    return strides


def _scalar(op: ir.Operation, where: str) -> dict:
    attr = op.attributes["value"]
    t = op.result.type
    if str(t) == "index" or str(t).startswith("i"):
        width = 64 if str(t) == "index" else ir.IntegerType(t).width
        return {"type": f"i{width}", "value": ir.IntegerAttr(attr).value}
    if str(t) in ("f16", "bf16", "f32", "f64"):
        return {"type": str(t), "value": ir.FloatAttr(attr).value}
    return {"type": str(t), "value": None}  # usable only if no kernel reads it


def _launch(op: ir.Operation, names: dict, memrefs: dict, scalars: dict, where: str) -> dict:
    kernel = ir.SymbolRefAttr(op.attributes["kernel"])
    # operands: async deps, grid x y z, block x y z, [cluster], [dynamic smem], kernel args
    segments = list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))
    operands = list(op.operands)
    if segments[0]:
        raise KilnError("asynchronous launches are not planned yet", location=where, hint=_HINT)
    sizes = []
    for value in operands[segments[0]:segments[0] + 6]:
        vid = names.get(value)
        if vid not in scalars:
            raise KilnError("a launch's grid depends on values computed on the host",
                            location=where, hint=_HINT)
        sizes.append(int(scalars[vid]["value"]))
    # segments: async deps, grid x/y/z, block x/y/z, cluster x/y/z, dynamic shared memory,
    # kernel operands, async object
    if len(segments) != 13 or any(segments[7:11]) or segments[12]:
        raise KilnError("launches with clusters, dynamic shared memory or async objects are "
                        "not planned yet", location=where, hint=_HINT)
    args = []
    start = sum(segments[:11])
    access = [ir.StringAttr(a).value for a in op.attributes["kiln.access"]] \
        if "kiln.access" in op.attributes else None
    for position, value in enumerate(operands[start:start + segments[11]]):
        vid = names.get(value)
        if vid in memrefs:
            m = memrefs[vid]
            args.append({"kind": "memref", "root": m["root"], "offset": m["offset"],
                         "sizes": m["sizes"], "strides": m["strides"],
                         "access": access[position] if access else "rw"})
        elif vid in scalars and scalars[vid]["value"] is not None:
            args.append({"kind": "scalar", **scalars[vid]})
        else:
            raise KilnError(f"kernel argument of type {value.type} is computed on the host",
                            location=where, hint=_HINT)
    module_name, kernel_name = kernel.value
    return {"op": "launch", "kernel": module_name, "function": kernel_name,
            "grid": sizes[:3], "block": sizes[3:], "args": args}


def _global_bytes(module: ir.Module, symbol: str, layout: dict, where: str) -> bytes:
    for op in module.body.operations:
        op = op.operation
        if op.name == "memref.global" and ir.StringAttr(op.attributes["sym_name"]).value == symbol:
            try:
                value = op.attributes["initial_value"]
            except TypeError:  # element types the bindings cannot read (complex): the text
                data = _bytes_from_text(str(op), layout)
                if data is not None:
                    return data
                break
            try:
                dense = ir.DenseElementsAttr(value)
            except ValueError:
                break
            count = int(np.prod(layout["sizes"], dtype=np.int64))
            dtype = _NUMPY.get(layout["element"])
            if dtype is None or layout["element"] in _TEXT_ONLY:  # the bindings cannot read
                data = _bytes_from_text(str(op), layout)
                if data is None:
                    break
                return data
            if dense.is_splat:
                return np.full(count, np.array(dense.get_splat_value().value, dtype)).tobytes()
            return np.ascontiguousarray(np.array(dense), dtype=dtype).tobytes()
    raise KilnError(f"constant @{symbol} ({layout['element']}) cannot be uploaded",
                    location=where, hint="the GPU target uploads dense int/float constants")


def _bytes_from_text(text: str, layout: dict) -> bytes | None:
    """A global's bytes from its printed `dense<...>` value: hex data as is; else each
    element (or complex part) a number, or a hexadecimal bit pattern (`0x7F80`: bf16 inf)."""
    import re
    match = re.search(r"= dense<(.*)>(?: \{[^}]*\})?\s*$", text, re.S)
    if match is None:
        return None
    body = match.group(1).strip()
    if body.startswith('"0x'):
        return bytes.fromhex(body[3:-1])
    element = layout["element"]
    part = {"complex<f32>": np.float32, "complex<f64>": np.float64}.get(element) \
        or _NUMPY.get(element)
    if part is None:
        return None
    bits = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[np.dtype(part).itemsize]
    floating = np.dtype(part).kind not in "iub"   # ml_dtypes' bfloat16 has kind 'V'
    values = []
    for token in re.findall(r"0x[0-9A-Fa-f]+|true|false|[-+]?[0-9.]+(?:[eE][-+]?\d+)?|[-+]?inf|nan",
                            body):
        if token.startswith("0x") and floating:
            values.append(np.array(int(token, 16), bits).view(part))
        elif token in ("true", "false"):
            values.append(np.array(token == "true", part))
        else:
            values.append(np.array(float(token) if floating else int(token), part))
    width = 2 if element.startswith("complex") else 1   # scalars per element
    array = np.array(values, part).reshape(-1, width)
    count = int(np.prod(layout["sizes"], dtype=np.int64))
    if len(array) == 1 and count > 1:  # a splat
        array = np.repeat(array, count, axis=0)
    return np.ascontiguousarray(array).tobytes()


# Element types whose constants are read from their text; sub-byte integers take a byte each,
# as LLVM stores them.
_TEXT_ONLY = ("bf16", "i2", "i4")
_NUMPY = {"i2": np.int8, "i4": np.int8, "bf16": ml_dtypes.bfloat16, "f16": np.float16, "f32": np.float32, "f64": np.float64, "i1": np.bool_,
          "i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64}


# -- kiln-gpu-annotate-launches -----------------------------------------------------------------

def annotate_launches(module: ir.Module) -> None:
    """Record on each gpu.launch_func how its kernel uses each argument ("r", "w", "rw" or
    "" for scalars), read off the outlined gpu.func while its memrefs are still memrefs: the
    plan's thunks say which buffers a launch reads and writes."""
    kernels = {}
    for op in module.body.operations:
        op = op.operation
        if op.name != "gpu.module":
            continue
        for inner in op.regions[0].blocks[0].operations:
            inner = inner.operation
            if inner.name == "gpu.func":
                kernels[(_symbol(op), _symbol(inner))] = [
                    _access(arg) for arg in inner.regions[0].blocks[0].arguments]

    def visit(op):
        op = op.operation
        if op.name == "gpu.launch_func":
            access = kernels.get(tuple(ir.SymbolRefAttr(op.attributes["kernel"]).value))
            if access is not None:
                op.attributes["kiln.access"] = ir.ArrayAttr.get(
                    [ir.StringAttr.get(a) for a in access])
        return ir.WalkResult.ADVANCE
    for op in module.body.operations:
        if op.operation.name == "func.func":
            op.operation.walk(visit)


def _symbol(op: ir.Operation) -> str:
    return ir.StringAttr(op.attributes["sym_name"]).value


def _access(value: ir.Value) -> str:
    try:
        ir.MemRefType(value.type)
    except ValueError:
        return ""
    reads = writes = False
    pending = [value]
    while pending:
        current = pending.pop()
        for use in current.uses:
            owner = use.owner.operation if hasattr(use.owner, "operation") else use.owner
            if owner.name in VIEW_OPS or owner.name == "memref.view":
                pending.extend(owner.results)
            elif owner.name == "memref.load":
                reads = True
            elif owner.name == "memref.store":
                writes = writes or use.operand_number == 1
                reads = reads or use.operand_number != 1
            else:
                reads = writes = True  # anything else: assume both
    return ("r" if reads else "") + ("w" if writes else "")
