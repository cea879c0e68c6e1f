"""What the GPU target cannot run yet, named before legalization (`kiln-gpu-check-supported`).

The GPU target shares the CPU target's `legalize` stage, which turns custom calls into calls
of the C runtime's dispatcher and collectives, send/recv and infeed/outfeed into calls of
Kiln's collective runtime (`custom_call @kiln.collective.<op>`). Neither can run on the
GPU: left alone, such a call surfaces much later as a value "the host needs" or a kernel
calling a host function. This check runs right after JAX's op-like custom calls (top-k,
sharding annotations, shape assertions) became ordinary ops. Custom calls whose target is
registered for the GPU (platform "CUDA"), collectives and host transfers become plan steps
here (custom_calls.py); every other custom call still present is one the GPU target cannot
run: it names the first, where the program wrote it.
"""
from __future__ import annotations

from torch_mlir import ir

from ...errors import KilnError
from .custom_calls import lower_gpu_custom_calls

COLLECTIVE_PREFIX = "kiln.collective."  # lowering/legalize/collectives.py's targets
_HOST_TRANSFERS = {"send", "recv", "infeed", "outfeed"}
# The same ops before kiln-lower-collectives (the check is right wherever it runs: the
# plan stages only their lowered calls).
_COLLECTIVES = {f"stablehlo.{kind}" for kind in _HOST_TRANSFERS}


def check_supported(module: ir.Module) -> None:
    lower_gpu_custom_calls(module)
    found = []

    def visit(op):
        op = op.operation
        if op.name == "stablehlo.custom_call" or op.name in _COLLECTIVES:
            found.append(op)
            return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE
    module.operation.walk(visit)
    if found:
        raise _unsupported(found[0])


def _unsupported(op: ir.Operation) -> KilnError:
    where = str(op.location)
    target = ir.StringAttr(op.attributes["call_target_name"]).value \
        if op.name == "stablehlo.custom_call" else COLLECTIVE_PREFIX + op.name.split(".", 1)[1]
    if target.startswith(COLLECTIVE_PREFIX):
        kind = target[len(COLLECTIVE_PREFIX):]
        what = "host transfer" if kind in _HOST_TRANSFERS else "collective"
        return KilnError(f"'stablehlo.{kind}' ({what}) is not supported by the GPU target yet",
                         location=where,
                         hint="the GPU target runs collectives and host transfers once "
                              "kiln-lower-collectives lowered them; compile with "
                              "target='cpu' otherwise")
    return KilnError(f"custom call '{target}' is not supported by the GPU target yet: no "
                     "target of that name is registered for the GPU (platform 'CUDA')",
                     location=where,
                     hint="register a GPU implementation (kiln.register_custom_call(name, fn, "
                          "platform='CUDA'): void fn(CUstream, void** buffers, const char* "
                          "opaque, size_t opaque_len), or an XLA FFI handler), or compile "
                          "with target='cpu'")
