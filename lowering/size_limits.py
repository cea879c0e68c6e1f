"""kiln-check-buffer-sizes: every tensor and memref a program names must have a byte size that
fits in 64 bits and in memory, checked before anything is allocated.

Lowered code computes a buffer's size as elements x element bytes in 64-bit arithmetic, which
wraps: `tensor<2147483648x2147483648xf32>` asked the allocator for 0 bytes and then wrote 16
EiB into the block it got. Each shaped type in the module (op results, block arguments, the
signatures of functions and globals) is sized here with exact integers; one whose size
overflows, or exceeds KILN_MAX_BUFFER_BYTES (default: this machine's physical memory), is a
located KilnError. The pass runs on the input (verify stage) and again on the buffers
bufferization made, which include every new shape legalization made (im2col patches,
scatter loops): one walk each, about as long as the other whole-module checks. Sizes known
only at run time are checked by the guards of the ops that compute them (bounds_guards.py)
and, against KILN_MAX_BUFFER_BYTES, by the runtime's allocator (runtime/kiln_parallel.c).
"""
from __future__ import annotations

import os

from torch_mlir import ir

from .. import environment
from ..errors import KilnError
from .ir_util import walk

LIMIT_ENV = "KILN_MAX_BUFFER_BYTES"
_INT64_MAX = (1 << 63) - 1
# The most bytes a size computed at run time may reach before the runtime's allocator applies
# the limit (it caps requests at 2^62 too, so its rounding stays exact).
RUN_TIME_BYTES = 1 << 62


def physical_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return _INT64_MAX


def max_buffer_bytes() -> int:
    """KILN_MAX_BUFFER_BYTES (a byte count), else physical memory."""
    text = (environment.get(LIMIT_ENV) or "").strip()
    if not text:
        return physical_memory()
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value <= 0:
        raise KilnError(f"{LIMIT_ENV}={text!r} is not a positive number of bytes",
                        hint=f"set {LIMIT_ENV} to a byte count, e.g. 8589934592 for 8 GiB")
    return min(value, _INT64_MAX)


def element_bytes(element: ir.Type) -> int | None:
    """Storage bytes of one element (sub-byte types take a byte each, as Kiln stores them);
    None for types without a size of their own (tokens)."""
    if isinstance(element, ir.ComplexType):
        part = element_bytes(element.element_type)
        return None if part is None else 2 * part
    if isinstance(element, ir.IndexType):
        return 8
    if isinstance(element, ir.IntegerType):
        return max(1, (element.width + 7) // 8)
    if isinstance(element, ir.FloatType):
        return max(1, (element.width + 7) // 8)
    if isinstance(element, (ir.RankedTensorType, ir.VectorType)):   # tensor of vectors
        inner = element_bytes(element.element_type)
        count = _static_count(ir.ShapedType(element))
        return None if inner is None or count is None else inner * count
    return None


def _static_count(shaped: ir.ShapedType) -> int | None:
    if not shaped.has_rank:
        return None
    count = 1
    for d in shaped.shape:
        if not ir.ShapedType.is_dynamic_size(d):
            count *= d
    return count


def byte_size(t: ir.Type) -> int | None:
    """The exact byte size of a shaped type's static part (dynamic dimensions count as 1),
    of a tuple's elements together, or None for types that hold no buffer."""
    if isinstance(t, ir.TupleType):
        sizes = [byte_size(t.get_type(i)) for i in range(t.num_types)]
        return sum(s for s in sizes if s is not None)
    if not isinstance(t, (ir.RankedTensorType, ir.MemRefType, ir.VectorType)):
        return None
    shaped = ir.ShapedType(t)
    count = _static_count(shaped)
    size = element_bytes(shaped.element_type)
    return None if count is None or size is None else count * size


class _Checker:
    def __init__(self):
        self.limit = max_buffer_bytes()
        # Types are uniqued by the context, so a program's few distinct types are sized once
        # (keyed by the type itself: printing each one cost more than the check).
        self.seen: dict[ir.Type, int | None] = {}

    def check(self, t: ir.Type, where: ir.Operation, what: str) -> None:
        size = self.seen.get(t, -1)
        if size == -1:
            size = self.seen[t] = byte_size(t)
        if size is None or size <= self.limit:
            return
        key = str(t)
        location = str(where.location)   # the driver names the file (diagnostics.py)
        if size > _INT64_MAX:
            problem = f"{size} bytes, more than a 64-bit size can hold"
        else:
            problem = f"{size} bytes, more than the {self.limit}-byte limit"
        raise KilnError(f"{what} of '{where.name}' has type {_short(key)}: {problem}",
                        location=location,
                        hint=f"no buffer may exceed {LIMIT_ENV} (default: physical memory); "
                             f"use smaller shapes, or raise {LIMIT_ENV} if the machine has the "
                             f"memory")


def _short(text: str) -> str:
    return text if len(text) <= 120 else text[:117] + "..."


def check_buffer_sizes(module: ir.Module) -> None:
    checker = _Checker()
    for op in walk(module.operation):
        for i, result in enumerate(op.results):
            checker.check(result.type, op, f"result {i}")
        for region in op.regions:
            for block in region.blocks:
                for arg in block.arguments:
                    checker.check(arg.type, op, f"block argument {arg.arg_number}")
        if "function_type" in op.attributes:
            try:
                ftype = ir.FunctionType(ir.TypeAttr(op.attributes["function_type"]).value)
            except ValueError:
                continue   # llvm.func's type is not a FunctionType
            for t in [*ftype.inputs, *ftype.results]:
                checker.check(t, op, "signature")
        elif op.name == "memref.global":
            checker.check(ir.TypeAttr(op.attributes["type"]).value, op, "the global")
