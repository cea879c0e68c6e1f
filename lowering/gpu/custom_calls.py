"""Custom calls on the GPU target: `stablehlo.custom_call @name` whose target is registered
for the GPU (`kiln.register_custom_call(name, fn, platform="CUDA")`, XLA's platform) runs as
a step of the execution plan, with either of XLA's GPU calling conventions:

* api_version 1-3, seed 004's
      void f(CUstream stream, void** buffers, const char* opaque, size_t opaque_len
             [, XlaCustomCallStatus* status])      // api_version 1; 2 and 3 with the status
  `buffers` holding the device pointers of the operands, then of the results;
* api_version 4, XLA's typed FFI (a C handler built against jaxlib's xla/ffi/api headers,
  or a dictionary of them by stage): the call frame the CPU target builds
  (runtime/kiln_ffi.c), its buffers device pointers, its attributes decoded as on the CPU,
  and `PlatformStream<cudaStream_t>` the plan's stream (gpu_plan.py). As on the CPU, a
  dictionary `backend_config` or `mhlo.backend_config` (JAX's form) makes a call typed FFI.

Here (the `legalize` stage, where kiln-gpu-check-supported runs) each such call becomes

    %b0 = bufferization.to_buffer %operand read_only      // each operand's device buffer
    %out = memref.alloc()                                  // each result's
    func.call @kiln_gpu_custom_call_N(%b0, ..., %out, ...) {kiln.gpu.target = "name", ...}
    %result = bufferization.to_tensor %out restrict writable

a call of a private declaration that bufferization leaves alone; the plan (host.py) reads
it as a `custom-call` step. Operands and results are static arrays in the default layout;
tuples are not planned (a located error). Tokens (`!stablehlo.token`) carry no data: they
get no buffer, a token result is `stablehlo.after_all` of the call's token operands (the
call keeps its place in program order as a call of an external function), and a typed-FFI
handler still sees each token where XLA passes it, a rank-0 TOKEN buffer with a null
pointer (`kiln.gpu.ffi_leaves` records where they are).

Collectives (`kiln.collective.*` after kiln-lower-collectives: all-reduce, all-gather,
reduce-scatter, all-to-all, collective permute and broadcast, replica and partition ids)
and host transfers (send/recv between devices, infeed/outfeed to the host's queues) become
the same calls, marked host-staged: the plan downloads their operands, runs Kiln's
collective runtime on the host as the CPU target does (each device a thread meeting the
others on the fabric, the Executable's infeed/outfeed queues) and uploads the results.
"""
from __future__ import annotations

import json

from torch_mlir import ir
from torch_mlir.dialects import bufferization, func, memref

from ...errors import KilnError
from ...runtime import custom_call as cc
from ...runtime import ffi

CALLEE_PREFIX = "kiln_gpu_custom_call_"
PLATFORM = "CUDA"
TARGET_ATTR, API_ATTR, OPAQUE_ATTR = "kiln.gpu.target", "kiln.gpu.api_version", "kiln.gpu.opaque"
RESULTS_ATTR = "kiln.gpu.results"   # how many of the call's buffers are results (the last)
HOST_STAGED_ATTR = "kiln.gpu.host_staged"   # a collective: run on the host, data staged
# Typed FFI (api_version 4): the attributes (runtime/ffi.py's FfiAttr JSON) and every leaf
# the handler sees, tokens included ({"operands"|"results": [[element type, shape], ...]}).
FFI_ATTRIBUTES_ATTR, FFI_LEAVES_ATTR = "kiln.gpu.ffi_attributes", "kiln.gpu.ffi_leaves"
COLLECTIVE_PREFIX = "kiln.collective."
# The collective runtime's targets a plan runs host-staged (distributed/collectives.py).
HOST_STAGED = frozenset(COLLECTIVE_PREFIX + name for name in (
    "all_reduce", "all_gather", "all_gather_stacked", "reduce_scatter", "all_to_all",
    "all_to_all_stacked", "collective_permute", "collective_broadcast", "collective_reduce",
    "device_id", "send", "recv", "infeed", "outfeed"))
_HINT = ("a GPU custom call takes and returns arrays in the default layout: api_version 1-3 "
         "(void f(CUstream, void** buffers, const char* opaque, size_t opaque_len"
         "[, XlaCustomCallStatus*])) or 4 (an XLA FFI handler)")


def is_gpu_target(name: str) -> bool:
    return cc.REGISTRY.lookup(name, PLATFORM) is not None


def is_plan_call(op: ir.Operation) -> bool:
    """A call this module made: a host step of the plan, not kernel work."""
    return op.name == "func.call" and \
        ir.FlatSymbolRefAttr(op.attributes["callee"]).value.startswith(CALLEE_PREFIX)


def lower_gpu_custom_calls(module: ir.Module) -> None:
    calls = []

    def visit(op):
        op = op.operation
        if op.name == "stablehlo.custom_call" and (
                ir.StringAttr(op.attributes["call_target_name"]).value in HOST_STAGED or
                is_gpu_target(ir.StringAttr(op.attributes["call_target_name"]).value)):
            calls.append(op)
        return ir.WalkResult.ADVANCE
    module.operation.walk(visit)
    taken = {ir.StringAttr(op.attributes["sym_name"]).value for op in module.body.operations
             if "sym_name" in op.operation.attributes}
    for op in calls:
        number = 0
        while f"{CALLEE_PREFIX}{number}" in taken:
            number += 1
        taken.add(f"{CALLEE_PREFIX}{number}")
        _lower(op, module, f"{CALLEE_PREFIX}{number}")


def _lower(op: ir.Operation, module: ir.Module, callee: str) -> None:
    where = str(op.location)
    name = ir.StringAttr(op.attributes["call_target_name"]).value
    api = (ir.IntegerAttr(op.attributes["api_version"]).value if "api_version" in op.attributes
           else 1) or 1   # API_VERSION_UNSPECIFIED behaves as the original convention
    # JAX marks typed-FFI calls by a dictionary backend config (as on the CPU target)
    if any(n in op.attributes and isinstance(op.attributes[n], ir.DictAttr)
           for n in ("mhlo.backend_config", "backend_config")):
        api = cc.API_TYPED_FFI
    staged = name in HOST_STAGED
    if not staged:
        _check_target(name, api, where)
    typed = api == cc.API_TYPED_FFI and not staged
    for attr in ("operand_layouts", "result_layouts"):
        if attr in op.attributes and not _default_layouts(op.attributes[attr]):
            raise KilnError(f"GPU custom call '{name}' gives {attr}", location=where, hint=_HINT)
    if "output_operand_aliases" in op.attributes and len(op.attributes["output_operand_aliases"]):
        raise KilnError(f"GPU custom call '{name}' aliases an output to an operand",
                        location=where, hint=_HINT)
    opaque = ""
    if "backend_config" in op.attributes and isinstance(op.attributes["backend_config"],
                                                         ir.StringAttr):
        opaque = ir.StringAttr(op.attributes["backend_config"]).value
    tokens_allowed = staged or typed
    data_operands = [v for v in op.operands if not _is_token(v.type, tokens_allowed, where)]
    data_results = [r for r in op.results if not _is_token(r.type, tokens_allowed, where)]
    operands = [_array(v.type, "operand", where) for v in data_operands]
    results = [_array(r.type, "result", where) for r in data_results]
    with ir.InsertionPoint(op), op.location:
        buffers = []
        for value, t in zip(data_operands, operands):
            value = _bitcast(value, _signless(t))
            to_buffer = bufferization.ToBufferOp(_memref(t), value, read_only=True)
            # kept apart from an identical to_buffer elsewhere (CSE), as on the CPU
            to_buffer.operation.attributes[TARGET_ATTR] = ir.StringAttr.get(callee)
            buffers.append(to_buffer.result)
        outs = [memref.AllocOp(_memref(t), [], [], alignment=64).result for t in results]
        call = func.CallOp([], callee, buffers + outs)
        call.operation.attributes[TARGET_ATTR] = ir.StringAttr.get(name)
        call.operation.attributes[API_ATTR] = ir.IntegerAttr.get(
            ir.IntegerType.get_signless(32), api)
        call.operation.attributes[OPAQUE_ATTR] = ir.StringAttr.get(opaque)
        call.operation.attributes[RESULTS_ATTR] = ir.IntegerAttr.get(
            ir.IntegerType.get_signless(32), len(results))
        if staged:
            call.operation.attributes[HOST_STAGED_ATTR] = ir.UnitAttr.get()
        if typed:
            from ..legalize.custom_calls import ffi_attributes
            attributes = [a.to_json() for a in ffi_attributes(op, name, where)]
            call.operation.attributes[FFI_ATTRIBUTES_ATTR] = ir.StringAttr.get(
                json.dumps(attributes))
            call.operation.attributes[FFI_LEAVES_ATTR] = ir.StringAttr.get(json.dumps(
                {"operands": [_leaf(v.type, where) for v in op.operands],
                 "results": [_leaf(r.type, where) for r in op.results]}))
        values = [_bitcast(bufferization.ToTensorOp(_signless(t), out, restrict=True,
                                                    writable=True).result, t)
                  for t, out in zip(results, outs)]
        token_operands = [v for v in op.operands if _token(v.type)]
        for old in op.results:
            if _token(old.type):   # no data: ordered after the call's own tokens
                old.replace_all_uses_with(ir.Operation.create(
                    "stablehlo.after_all", results=[old.type],
                    operands=token_operands).result)
    for old, new in zip(data_results, values):
        old.replace_all_uses_with(new)
    op.erase()
    with ir.InsertionPoint(module.body), ir.Location.unknown():
        declaration = func.FuncOp(callee, ir.FunctionType.get(
            [_memref(t) for t in operands + results], []))
        declaration.attributes["sym_visibility"] = ir.StringAttr.get("private")


def _check_target(name: str, api: int, where: str) -> None:
    target = cc.REGISTRY.lookup(name, PLATFORM)
    if api not in (1, 2, 3, cc.API_TYPED_FFI):
        raise KilnError(f"custom call '{name}' has api_version {api}: the GPU target runs "
                        "api_version 1-4 targets", location=where, hint=_HINT)
    if api == cc.API_TYPED_FFI and not target.ffi_capable:
        raise KilnError(f"custom call '{name}' uses the typed FFI (api_version 4), but its "
                        "target was declared with XLA_REGISTER_CUSTOM_CALL_TARGET, an "
                        "api_version 1-3 function", location=where,
                        hint="call it with api_version 1-3, or register an XLA FFI handler")
    if target.api_version is not None and target.api_version != api:
        raise KilnError(f"custom call '{name}' has api_version {api}, but its target was "
                        f"registered for api_version {target.api_version}", location=where,
                        hint="the api_version selects the calling convention; they must agree")
    if target.is_python:
        raise KilnError(f"GPU custom-call target '{name}' is a Python callable", location=where,
                        hint="a GPU target is a C function taking device pointers; " + _HINT)


def _token(t: ir.Type) -> bool:
    return str(t) == ffi.TOKEN


def _is_token(t: ir.Type, allowed: bool, where: str) -> bool:
    if _token(t) and not allowed:
        raise KilnError("a GPU custom call with api_version 1-3 takes or returns a token",
                        location=where, hint="tokens pass to typed-FFI (api_version 4) "
                                             "handlers; " + _HINT)
    return _token(t)


def _leaf(t: ir.Type, where: str) -> list:
    """[element type, shape] of one leaf an FFI handler sees (a token: rank 0)."""
    if _token(t):
        return [ffi.TOKEN, []]
    tensor = _array(t, "leaf", where)
    ffi.dtype_code(str(tensor.element_type))   # one the FFI has (a KilnError otherwise)
    return [str(tensor.element_type), list(tensor.shape)]


def _array(t: ir.Type, what: str, where: str) -> ir.RankedTensorType:
    try:
        tensor = ir.RankedTensorType(t)
    except ValueError:
        raise KilnError(f"a GPU custom call's {what} of type {t}", location=where,
                        hint=_HINT) from None
    if not tensor.has_static_shape:
        raise KilnError(f"a GPU custom call's {what} of dynamic type {t}", location=where,
                        hint=_HINT)
    return tensor


def _memref(t: ir.RankedTensorType) -> ir.MemRefType:
    return ir.MemRefType.get(t.shape, _signless(t).element_type)


def _signless(t: ir.RankedTensorType) -> ir.RankedTensorType:
    """The tensor type with a signless element type (buffers hold bits: ui32 as i32)."""
    element = t.element_type
    if isinstance(element, ir.IntegerType) and not ir.IntegerType(element).is_signless:
        element = ir.IntegerType.get_signless(ir.IntegerType(element).width)
    return ir.RankedTensorType.get(t.shape, element)


def _bitcast(value: ir.Value, t: ir.RankedTensorType) -> ir.Value:
    if value.type == t:
        return value
    return ir.Operation.create("stablehlo.bitcast_convert", results=[t],
                               operands=[value]).result


def _default_layouts(attr: ir.Attribute) -> bool:
    """Every layout in the array the descending (row-major) one."""
    for layout in ir.ArrayAttr(attr):
        minor_to_major = [int(v) for v in ir.DenseIntElementsAttr(layout)]
        if minor_to_major != list(range(len(minor_to_major)))[::-1]:
            return False
    return True
