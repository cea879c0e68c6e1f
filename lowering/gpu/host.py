"""The host function after kernel outlining, read as the GPU execution plan.

What is left on the host after `gpu-kernel-outlining` is code over buffers: allocations,
constants (memref.get_global), views (reshapes, subviews: metadata only), contiguous copies,
kernel launches, custom calls (custom_calls.py), and host control flow (control_flow.py):
`scf.while`/`scf.for`/`scf.if`/`scf.index_switch` steering kernels, the scalar arithmetic
they need, and the loads (downloads) of scalars the device computed. Reading it once at
compile time gives the plan as plain data (JSON): the runtime (kiln.runtime.gpu_plan)
replays it through the same interface on a real GPU (CUDA driver) and in the emulator.

Every memref value is (root buffer, element offset, sizes, strides): its static type gives
all but the root. A control-flow op's results and its regions' arguments are roots of their
own, bound at run time to the buffers flowing in (`bindings` lists what may flow in, for the
thunk view); scalars the host computes are value ids too, evaluated per call. A kernel
receives each memref argument as MLIR's expanded descriptor (allocated pointer, aligned
pointer, offset, sizes..., strides...), the convention `convert-gpu-to-nvvm` gives kernel
parameters. Runs of launches and copies become command buffers (`group_command_buffers`).
"""
from __future__ import annotations

import base64
import json

import ml_dtypes
import numpy as np
from torch_mlir import ir

from ...errors import KilnError
from ..ir_util import find_entry
from . import custom_calls, host_ops

# Ops that only give another view of their first operand's buffer.
VIEW_OPS = frozenset({"memref.collapse_shape", "memref.expand_shape", "memref.cast",
                      "memref.reinterpret_cast", "memref.subview"})
# Pure host arithmetic: scalar steps the plan evaluates where it can (host_ops.py); a value
# it cannot compute is an error only where a step needs it.
_HOST_ARITHMETIC = ("arith.", "affine.apply", "index.", "complex.", "math.")
_HINT = ("the GPU plan runs kernels, copies, custom calls and control flow on scalars the host "
         "computes or reads back; `kiln-opt FILE --target gpu --stage gpu-map` shows the host "
         "function")


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
    return _PlanReader(module, func).plan()


class _PlanReader:
    """Reads the host function's blocks into step lists (control flow nests them)."""

    def __init__(self, module: ir.Module, func: ir.Operation):
        self.module, self.func = module, func
        self.entry = ir.StringAttr(func.attributes["sym_name"]).value
        self.names: dict = {}       # ir.Value -> value id
        self.memrefs: dict = {}     # value id -> {"root": id, **layout}
        self.buffers: dict = {}     # root id -> bytes
        self.scalars: dict = {}     # value id -> {"type", "value"}: known when compiled
        self.runtime: dict = {}     # value id -> type: scalars the host computes per call
        self.opaque: dict = {}      # value id -> why the host cannot compute it
        self.constants: dict = {}   # value id -> scalar: constants the host steps read
        self.bindings: dict = {}    # value id -> ids of the values it may be bound to

    def new(self, value: ir.Value) -> int:
        self.names[value] = len(self.names)
        return self.names[value]

    def plan(self) -> dict:
        func, entry = self.func, self.entry
        block = func.regions[0].blocks[0]
        params = []
        for arg in block.arguments:
            where = f"argument {arg.arg_number} of @{entry}"
            try:
                t = ir.MemRefType(arg.type)
            except ValueError:
                raise KilnError(f"{where} has type {arg.type}", location=where,
                                hint=_HINT) from None
            vid = self.new(arg)
            layout = memref_layout(t, where)
            self.memrefs[vid] = {"root": vid, **layout}
            self.buffers[vid] = _root_bytes(layout)
            params.append(vid)
        steps = group_command_buffers(self.block(block))
        inputs = ir.IntegerAttr(func.attributes[INPUTS_ATTR]).value \
            if INPUTS_ATTR in func.attributes else 0
        plan = {"entry": entry, "params": params, "inputs": inputs,
                "buffers": {str(k): v for k, v in self.buffers.items()},
                "memrefs": {str(k): v for k, v in self.memrefs.items()}, "steps": steps}
        if self.constants:
            plan["constants"] = {str(k): v for k, v in self.constants.items()}
        if self.bindings:
            plan["bindings"] = {str(k): v for k, v in self.bindings.items()}
        return plan

    def block(self, block: ir.Block) -> list[dict]:
        steps: list[dict] = []
        for op in block.operations:
            self.op(op.operation, steps)
        return steps

    def op(self, op: ir.Operation, steps: list[dict]) -> None:
        where = str(op.location)
        name = op.name
        memrefs, scalars = self.memrefs, self.scalars
        if name in ("func.return", "scf.yield", "scf.condition"):
            if name == "func.return" and len(op.operands):
                raise KilnError("the entry still returns buffers", location=where, hint=_HINT)
        elif name in ("memref.alloc", "memref.alloca"):
            vid = self.new(op.result)
            layout = memref_layout(ir.MemRefType(op.result.type), where)
            memrefs[vid] = {"root": vid, **layout}
            self.buffers[vid] = _root_bytes(layout)
            steps.append({"op": "alloc", "id": vid, "bytes": self.buffers[vid]})
        elif name == "memref.get_global":
            vid = self.new(op.result)
            layout = memref_layout(ir.MemRefType(op.result.type), where)
            memrefs[vid] = {"root": vid, **layout}
            data = _global_bytes(self.module,
                                 ir.FlatSymbolRefAttr(op.attributes["name"]).value, layout, where)
            self.buffers[vid] = len(data)
            steps.append({"op": "upload", "id": vid, "bytes": len(data),
                          "data": base64.b64encode(data).decode()})
        elif name in VIEW_OPS:
            source = memrefs[self.names[op.operands[0]]]
            vid = self.new(op.result)
            result = ir.MemRefType(op.result.type)
            if name == "memref.cast" and not _static_layout(result):
                # a cast to a dynamic layout: the descriptor is the source's
                memrefs[vid] = dict(source)
            else:
                memrefs[vid] = {"root": source["root"], **memref_layout(result, where)}
        elif name == "memref.dealloc":
            pass  # every temporary is freed when the call ends
        elif name == "memref.copy":
            src, dst = (memrefs[self.names[v]] for v in op.operands)
            for m in (src, dst):
                if m["strides"] != _row_major(m["sizes"]):
                    raise KilnError("a strided memref.copy reached the host", location=where,
                                    hint="kiln-copies-as-loops should have made it a kernel")
            steps.append({"op": "copy", "src": src["root"], "dst": dst["root"],
                          "src_offset": src["offset"] * src["element_bytes"],
                          "dst_offset": dst["offset"] * dst["element_bytes"],
                          "bytes": _root_bytes(src)})
        elif name == "memref.load":
            steps.append(self.download(op, where))
        elif name == "complex.constant":
            vid = self.new(op.result)
            parts = [ir.FloatAttr(a).value for a in ir.ArrayAttr(op.attributes["value"])]
            scalars[vid] = {"type": str(op.result.type), "value": parts}
        elif name == "arith.constant":
            vid = self.new(op.result)
            scalars[vid] = _scalar(op, where)
        elif name == "gpu.launch_func":
            steps.append(_launch(op, self, where))
        elif custom_calls.is_plan_call(op):
            steps.append(self.custom_call(op, where))
        elif name in ("scf.while", "scf.if", "scf.index_switch", "scf.for"):
            steps.append(self.control(op, where))
        elif name.startswith(_HOST_ARITHMETIC) and not op.regions:
            # pure host arithmetic: a step, evaluated per call (its result may steer
            # control flow or be a kernel argument)
            step = host_ops.scalar_step(op, [self.names.get(v) for v in op.operands])
            unknown = [self.opaque[self.names[v]] for v in op.operands
                       if self.names.get(v) in self.opaque]
            if unknown:   # computed from what the host cannot compute: the first reason
                step = unknown[0]
            elif not isinstance(step, str):
                try:
                    self.need(list(op.operands), where)
                except KilnError as exc:
                    step = exc.message
            for result in op.results:
                vid = self.new(result)
                if isinstance(step, str):
                    self.opaque[vid] = step
            if not isinstance(step, str):
                step["id"] = self.names[op.results[0]]
                self.runtime[step["id"]] = step["type"]
                steps.append(step)
        else:
            raise KilnError(f"'{name}' cannot run on the host of the GPU target",
                            location=where, hint=_HINT)

    # -- scalars the host computes ---------------------------------------------------------

    def need(self, values, where: str) -> list[int]:
        """The ids of scalars a host step reads: constants are recorded for the plan, values
        the host cannot compute are a located error."""
        ids = []
        for value in values:
            vid = self.names.get(value)
            if vid in self.runtime:
                pass
            elif vid in self.scalars and self.scalars[vid]["value"] is not None:
                self.constants[vid] = self.scalars[vid]
            elif vid in self.opaque:
                raise KilnError(f"the host needs a scalar it cannot compute: {self.opaque[vid]}",
                                location=where, hint=_HINT)
            elif vid is None or vid not in self.memrefs:
                raise KilnError(f"a value of type {value.type} the host needs is computed "
                                "on the device", location=where, hint=_HINT)
            ids.append(vid)
        return ids

    def download(self, op: ir.Operation, where: str) -> dict:
        """A scalar read back from device memory (XLA's while thunk reads its predicate so)."""
        source = self.memrefs[self.names[op.operands[0]]]
        vid = self.new(op.result)
        element = str(op.result.type)
        self.runtime[vid] = host_ops.runtime_type(element)
        return {"op": "download", "id": vid, "src": source["root"], "type": element,
                "offset": source["offset"], "strides": source["strides"],
                "element_bytes": source["element_bytes"],
                "indices": self.need(list(op.operands)[1:], where)}

    def custom_call(self, op: ir.Operation, where: str) -> dict:
        """A custom call (lowering/gpu/custom_calls.py): the target gets the device pointers
        of its operands, then of its results."""
        count = len(list(op.operands))
        buffers = []
        for value in op.operands:
            m = self.memrefs[self.names[value]]
            if m["strides"] != _row_major(m["sizes"]):
                raise KilnError("a custom call's buffer is strided", location=where, hint=_HINT)
            buffers.append({"root": m["root"], "offset": m["offset"] * m["element_bytes"],
                            "bytes": _root_bytes(m), "shape": m["sizes"],
                            "element": m["element"]})
        results = ir.IntegerAttr(op.attributes[custom_calls.RESULTS_ATTR]).value
        step = {"op": "custom-call", "target": ir.StringAttr(op.attributes[
                    custom_calls.TARGET_ATTR]).value,
                "api_version": ir.IntegerAttr(op.attributes[custom_calls.API_ATTR]).value,
                "opaque": ir.StringAttr(op.attributes[custom_calls.OPAQUE_ATTR]).value,
                "operands": buffers[:count - results], "results": buffers[count - results:],
                "host_staged": custom_calls.HOST_STAGED_ATTR in op.attributes}
        if custom_calls.FFI_LEAVES_ATTR in op.attributes:   # typed FFI: what the frame holds
            step["ffi"] = {"attributes": json.loads(ir.StringAttr(
                op.attributes[custom_calls.FFI_ATTRIBUTES_ATTR]).value),
                **json.loads(ir.StringAttr(op.attributes[custom_calls.FFI_LEAVES_ATTR]).value)}
        return step

    # -- host control flow -----------------------------------------------------------------

    def bind(self, values, incoming: list[list], where: str) -> list[int]:
        """Ids for block arguments or results, each bound at run time to one of its
        `incoming` values (already read): a scalar, or a buffer whose layout they share."""
        ids = []
        for position, value in enumerate(values):
            vid = self.new(value)
            ids.append(vid)
            try:
                t = ir.MemRefType(value.type)
            except ValueError:
                self.runtime[vid] = host_ops.runtime_type(str(value.type))
                continue
            if _static_layout(t):
                layout = memref_layout(t, where)
            else:   # a dynamic layout (branches yielding casts): the incoming values'
                sources = [self.names[group[position]] for group in incoming
                           if self.names.get(group[position]) in self.memrefs]
                if not sources:
                    raise KilnError(f"a buffer of type {t} with no known layout",
                                    location=where, hint=_HINT)
                layout = {k: v for k, v in self.memrefs[sources[0]].items() if k != "root"}
            self.memrefs[vid] = {"root": vid, **layout}
            self.bindings[vid] = []
        return ids

    def flow(self, targets: list[int], values, where: str) -> list[int]:
        """The ids of values flowing into `targets` (a terminator's or the op's operands),
        checked: a buffer must have its target's layout (the plan binds root pointers)."""
        ids = [self.names[v] if self.names.get(v) in self.memrefs
               else self.need([v], where)[0] for v in values]
        for target, vid in zip(targets, ids):
            if target in self.memrefs:
                a, b = self.memrefs[target], self.memrefs[vid]
                if (a["offset"], a["sizes"], a["strides"]) != (b["offset"], b["sizes"],
                                                               b["strides"]):
                    raise KilnError("a control-flow value takes buffers of different layouts",
                                    location=where, hint=_HINT)
                if b["root"] not in self.bindings[target]:
                    self.bindings[target].append(b["root"])
        return ids

    def region(self, block: ir.Block, args: list[int], where: str) -> tuple[dict, list]:
        """A region's steps, and the values its terminator passes on (condition first)."""
        steps = self.block(block)
        terminator = block.operations[len(block.operations) - 1].operation
        return {"args": args, "steps": steps}, list(terminator.operands)

    def control(self, op: ir.Operation, where: str) -> dict:
        name = op.name
        operands, results = list(op.operands), list(op.results)
        if name == "scf.while":
            before, after = (r.blocks[0] for r in op.regions)
            before_args = self.bind(list(before.arguments), [operands], where)
            inits = self.flow(before_args, operands, where)
            first, (condition, *forwarded) = self.region(before, before_args, where)
            first["condition"] = self.need([condition], where)[0]
            # the body's arguments and the results take what the condition forwards
            after_args = self.bind(list(after.arguments), [forwarded], where)
            out = self.bind(results, [forwarded], where)
            first["yield"] = self.flow(after_args, forwarded, where)
            self.flow(out, forwarded, where)
            second, yielded = self.region(after, after_args, where)
            second["yield"] = self.flow(before_args, yielded, where)
            return {"op": "while", "inits": inits, "before": first, "after": second,
                    "results": out}
        if name == "scf.for":
            lower, upper, step = self.need(operands[:3], where)
            body = op.regions[0].blocks[0]
            (induction,) = self.bind(list(body.arguments)[:1], [], where)
            args = self.bind(list(body.arguments)[1:], [operands[3:]], where)
            inits = self.flow(args, operands[3:], where)
            out = self.bind(results, [operands[3:]], where)
            self.flow(out, operands[3:], where)
            region, yielded = self.region(body, [induction, *args], where)
            region["yield"] = self.flow(args, yielded, where)
            self.flow(out, yielded, where)
            return {"op": "for", "lower": lower, "upper": upper, "step": step,
                    "inits": inits, "body": region, "results": out}
        # scf.if, scf.index_switch: a region each, the results bound to what it yields
        read = [self.region(r.blocks[0], [], where) if len(r.blocks)
                else ({"args": [], "steps": []}, []) for r in op.regions]
        out = self.bind(results, [values for _, values in read if values], where)
        regions = []
        for region, values in read:
            region["yield"] = self.flow(out, values, where)
            regions.append(region)
        if name == "scf.if":
            return {"op": "if", "condition": self.need([operands[0]], where)[0],
                    "regions": regions, "results": out}
        cases = [int(c) for c in ir.DenseI64ArrayAttr(op.attributes["cases"])]
        # index_switch's regions: the default first, then the cases in order
        return {"op": "switch", "index": self.need([operands[0]], where)[0],
                "cases": cases, "regions": regions[1:] + regions[:1], "results": out}


# Launches and copies in a row that make a command buffer: XLA's default minimum graph size
# (xla_gpu_graph_min_graph_size), below which capturing costs more than it saves.
COMMAND_BUFFER_MIN_COMMANDS = 5
_COMMANDS = ("launch", "copy")
# Host steps that put no work on the device: a command buffer may hold them (the runtime
# does them before recording its commands).
_BOOKKEEPING = ("alloc", "upload", "scalar")


def group_command_buffers(steps: list[dict]) -> list[dict]:
    """Every run of at least COMMAND_BUFFER_MIN_COMMANDS launches and copies with no host
    step between them that needs the device (a download, control flow, a custom call)
    becomes one `command-buffer` step holding them (seed 002), in every nested step list."""
    for step in steps:
        for key in ("before", "after", "body"):
            if key in step:
                step[key]["steps"] = group_command_buffers(step[key]["steps"])
        for region in step.get("regions", []):
            region["steps"] = group_command_buffers(region["steps"])
    out: list[dict] = []
    run: list[dict] = []   # commands, and bookkeeping between them

    def close():
        while run and run[-1]["op"] not in _COMMANDS:   # trailing bookkeeping stays out
            tail.insert(0, run.pop())
        if sum(s["op"] in _COMMANDS for s in run) >= COMMAND_BUFFER_MIN_COMMANDS:
            out.append({"op": "command-buffer", "steps": list(run)})
        else:
            out.extend(run)
        out.extend(tail)
        run.clear()
        tail.clear()
    tail: list[dict] = []
    for step in steps:
        if step["op"] in _COMMANDS or (run and step["op"] in _BOOKKEEPING):
            run.append(step)
        else:
            close()
            out.append(step)
    close()
    return out


def _root_bytes(layout: dict) -> int:
    return int(np.prod(layout["sizes"], dtype=np.int64)) * layout["element_bytes"] \
        if layout["sizes"] else layout["element_bytes"]


def _static_layout(t: ir.MemRefType) -> bool:
    try:
        memref_layout(t, "")
    except KilnError:
        return False
    return True


def _static_or_scalar(t: ir.Type) -> bool:
    try:
        return _static_layout(ir.MemRefType(t))
    except ValueError:
        return True


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


def _launch(op: ir.Operation, reader: _PlanReader, where: str) -> dict:
    names, memrefs, scalars = reader.names, reader.memrefs, reader.scalars
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
        elif vid in reader.runtime:   # computed by the host (a loop counter): per call
            args.append({"kind": "scalar", "type": reader.runtime[vid], "value": None,
                         "id": vid})
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
