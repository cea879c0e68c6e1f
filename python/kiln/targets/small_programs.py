"""Small programs: where LLVM's optimizations cannot pay for themselves.

A program whose every loop runs a number of times known at compile time, over a few thousand
elements in all, runs in a few microseconds however it is compiled: a call's own cost (the
Python dispatch, the argument checks) is far larger. Compiling such a program at LLVM's O2
costs it 20-40 ms, most of the compile, which makes JAX's test-sized programs compile slower
than XLA does, so the CPU target compiles it at `SMALL_OPT_LEVEL` instead (targets/cpu.py).
Measured on the 35 JAX test programs (`kiln bench --compile-time`): LLVM's time went from
43 to 21 ms a program. O0 code is slower, though, and a call costs only about 5 us, so the
limit (SMALL_WORK) bounds what a small program can lose to about 3 us a call: a cliff
against XLA's ~7 us calls otherwise (tanh of 8192 floats: 27 us at O0, 7 us at O2). Tiny
programs (TINY_WORK) go further: LLVM's O0 code generation as well (targets/quick_codegen.py),
which took the 35 programs from 1.17x to 0.93x XLA's compile time (2026-11-23). An explicit
`opt_level=` option always wins.

The estimate (`work`) is read on the StableHLO after the `optimize` stage: the elements each
op reads or writes, products and convolutions times their contraction unless they become
BLAS calls (float products of at least blas.MIN_MACS multiply-adds), transcendental functions
times 4, sorts times log n, ops with bodies (reduce, map...) times the body's size. Loops
whose trip count is data (`while`) make a program not small, whatever its shapes.
"""
from __future__ import annotations

import math

from torch_mlir import ir

from ..lowering.codegen import blas

# Element-ops: at most a few microseconds of scalar code at -O0. Measured (2026-11-23): O0 code
# costs about 0.8 ns more per element-op than O2's, and a transcendental function about 2.5-3 ns
# more, so the limit keeps the loss under about 3 us a call (a call's own cost is about 5 us,
# XLA's 7 us): tanh of 8192 floats took 27 us at O0 against 7 us at O2 and was not small.
SMALL_WORK = 1 << 12
# What one element of these costs at O0, in element-ops: polynomial approximations
# (lowering/codegen/fastmath.py, f64math.py) that O2 vectorizes.
_TRANSCENDENTAL_COST = 4
_TRANSCENDENTAL = frozenset(f"stablehlo.{name}" for name in (
    "exponential", "exponential_minus_one", "log", "log_plus_one", "logistic", "tanh", "sine",
    "cosine", "tan", "atan2", "power", "cbrt")) | frozenset(
    {"chlo.erf", "chlo.erf_inv", "chlo.lgamma", "chlo.digamma"})
SMALL_OPT_LEVEL = 0
# The module attribute that carries the decision from `optimize` to LLVM.
OPT_LEVEL_ATTR = "kiln.llvm_opt_level"
# Tiny programs, at most this many element-ops, also get LLVM's O0 code generation (FastISel,
# the fast register allocator: targets/quick_codegen.py), 7-9 ms less than the full one. Its
# code spills every value a loop carries: measured (2026-11-23) about 1.5 ns more per
# element-op than O0 IR with full code generation, so this limit keeps that loss near 1.5 us
# a call. 29 of the 35 JAX test programs are tiny.
TINY_WORK = 1 << 10
# The module attribute that marks a tiny program (set with OPT_LEVEL_ATTR).
QUICK_CODEGEN_ATTR = "kiln.llvm_quick_codegen"

_UNBOUNDED = ("stablehlo.while", "scf.while")


class _TooMuch(Exception):
    pass


def is_small(module: ir.Module, limit: int = SMALL_WORK) -> bool:
    """Whether the program's work is known at compile time and at most `limit` element-ops."""
    return known_work(module, limit) is not None


def known_work(module: ir.Module, limit: int = SMALL_WORK) -> int | None:
    """The program's element-ops if known at compile time and at most `limit`, else None."""
    try:
        found = work(module.operation, limit)
    except _TooMuch:
        return None
    return found if found <= limit else None


def work(op: ir.Operation, limit: int) -> int:
    """The element-ops of everything nested in `op`; raises _TooMuch past `limit` or for an
    unbounded loop (stops early: a large program is told at its first large op)."""
    total = 0
    for region in op.regions:
        for block in region.blocks:
            for child in block.operations:
                total += _op_work(child.operation, limit)
                if total > limit:
                    raise _TooMuch
    return total


def _op_work(op: ir.Operation, limit: int) -> int:
    name = op.name
    if name in _UNBOUNDED:
        raise _TooMuch
    if name in ("func.func", "builtin.module"):
        return work(op, limit)
    size = _largest(op)
    if name == "stablehlo.dot_general":
        if not _on_blas(op, size * _contraction(op), blas.MIN_MACS):
            size *= _contraction(op)
    elif name == "stablehlo.convolution":
        if not _on_blas(op, size * _window_reads(op), blas.MIN_CONV_MACS):
            size *= _window_reads(op)
    elif name in ("stablehlo.sort", "stablehlo.fft"):
        size *= max(1, math.ceil(math.log2(max(2, size))))
    elif name in ("stablehlo.reduce_window", "stablehlo.select_and_scatter"):
        size *= _window(op)
    if name in _TRANSCENDENTAL:
        size *= _TRANSCENDENTAL_COST
    body = sum(_body_ops(r) for r in op.regions)
    return size * max(1, body)


def _on_blas(op: ir.Operation, macs: int, minimum: int) -> bool:
    """Whether the codegen stage makes this product a BLAS call (lowering/codegen/blas.py):
    then LLVM's level does not change its speed, and only its output counts."""
    element = str(ir.ShapedType(op.results[0].type).element_type)
    return macs >= minimum and element in ("f32", "f64", "complex<f32>", "complex<f64>")


def _body_ops(region: ir.Region) -> int:
    count = 0
    for block in region.blocks:
        for child in block.operations:
            count += 1 + sum(_body_ops(r) for r in child.operation.regions)
    return count


def _largest(op: ir.Operation) -> int:
    values = [*op.operands, *op.results]
    return max((_elements(v.type) for v in values), default=1)


def _elements(t: ir.Type) -> int:
    """Elements of a shaped type (1 for a scalar); a dynamic one is unbounded."""
    try:
        shaped = ir.ShapedType(t)
    except ValueError:
        return 1
    if not shaped.has_rank or not shaped.has_static_shape:
        raise _TooMuch
    return math.prod(shaped.shape)


def _contraction(op: ir.Operation) -> int:
    lhs = ir.ShapedType(op.operands[0].type)
    text = str(op.attributes["dot_dimension_numbers"])
    dims = _int_list(text, "lhs_contracting_dimensions")
    return math.prod(lhs.shape[d] for d in dims) if dims else 1


def _window_reads(op: ir.Operation) -> int:
    """What one output element of a convolution reads: the kernel over one output feature."""
    kernel = ir.ShapedType(op.operands[1].type)
    elements = math.prod(kernel.shape)
    text = str(op.attributes["dimension_numbers"]) if "dimension_numbers" in op.attributes else ""
    # The text form: [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]; the kernel's 'o' is its output
    # features.
    spec = text.split("x[", 1)[1].split("]", 1)[0].split(",") if "x[" in text else []
    labels = [label.strip() for label in spec]
    if "o" in labels and len(labels) == kernel.rank:
        elements //= max(1, kernel.shape[labels.index("o")])
    return elements


def _window(op: ir.Operation) -> int:
    if "window_dimensions" not in op.attributes:
        return 1
    return math.prod(ir.DenseI64ArrayAttr(op.attributes["window_dimensions"]))


def _int_list(text: str, key: str) -> list[int]:
    """The integers after `key = [...]` in an attribute's text (dot_dimension_numbers)."""
    start = text.find(key)
    if start < 0:
        return []
    open_at = text.find("[", start)
    close_at = text.find("]", open_at)
    inside = text[open_at + 1:close_at].strip()
    return [int(x) for x in inside.split(",")] if inside else []
