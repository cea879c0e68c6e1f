"""kiln-guard-run-time-shapes: the StableHLO constraints on sizes, indices and strides that a
program computes at run time, checked where the op runs.

Specialisation (shapes.py) makes most shape operands constants, and their constraints are then
checked by the ops' verifiers. What stays a run-time value is read from a tensor by the
lowered code: upstream's lowerings trust it, so a negative start or a limit past the end read
and wrote outside the operand's buffer, and a stride of 0 divided by zero. Before each such op
this pass inserts a guard: the few scalar comparisons its constraints need and a branch,
taken only on a violation, that calls the runtime's `kiln_runtime_check_failed`
(runtime/kiln_runtime.c). That stops the program the way a failed custom call does (nothing
after it runs, its temporaries are freed) and the call raises a KilnError naming the op, its
location and the constraint (runtime/custom_call.py: invoke_entry).

Guarded (StableHLO spec constraints; `dim` is the operand's size, static or read at run time):
  real_dynamic_slice        0 <= start <= limit <= dim, stride > 0, and a static result size
                            equal to ceil((limit - start) / stride)
  dynamic_iota              every output_shape entry >= 0, equal to the result's static sizes
  dynamic_broadcast_in_dim  output_dimensions >= 0 and equal to the result's static sizes;
                            each operand size is 1 or the output size it maps to
  (both)                    the result's byte count must not wrap (at most 2^62 bytes; the
                            allocator then applies KILN_MAX_BUFFER_BYTES, runtime/kiln_parallel.c)
  set_dimension_size        0 <= size <= dim
  slice                     limit_indices <= dim where the operand's size is dynamic (the
                            static start, limit and stride were checked by the verifier)
  shape agreement           where a dimension involved is dynamic, the sizes the spec requires
                            to be equal are (elementwise ops, select/clamp, concatenate,
                            dot_general, transpose, reduce and reduce_window inputs:
                            shape_agreement.py); nothing for static ones
  sizes that must fit       a dynamic operand of broadcast_in_dim, reshape, pad, reduce_window
                            or convolution with a static result, and while/if/case region
                            results returned as dynamic for a static declared type
                            (fit_guards.py). dynamic_update_slice with a dynamic operand or
                            update is refused at compile time ("cannot lower")
Clamped by the spec and by the lowerings, so never out of bounds (tested in
tests/py/test_runtime_bounds.py): dynamic_slice and dynamic_update_slice (starts clamped to
[0, dim - size], unsigned starts widened first by slicing.py), gather (start indices clamped)
and scatter (updates whose window leaves the operand are skipped, scatter.py).

The message travels as a constant in the object code: a guard's call passes its address and
length, so no table has to follow the compiled code into artifacts and caches.
"""
from __future__ import annotations

from torch_mlir import ir
from torch_mlir.dialects import arith, func, memref, scf, tensor

from ..diagnostics import format_location
from . import fit_guards as fits_
from . import shape_agreement as agreement
from .ir_util import walk

FAILED_SYMBOL = "kiln_runtime_check_failed"
_GLOBAL_PREFIX = "__kiln_guard_message_"
_SIZE_OPS = frozenset({"stablehlo.real_dynamic_slice", "stablehlo.dynamic_iota",
                       "stablehlo.dynamic_broadcast_in_dim", "stablehlo.set_dimension_size"})
# Guarded only where an operand has a dynamic size (static ones were checked by verifiers).
_WHEN_DYNAMIC = agreement.RULE_OPS | {"stablehlo.slice"}
# Every op the pass may guard (the registry skips a module with none of them).
GUARDED_OPS = _SIZE_OPS | _WHEN_DYNAMIC | frozenset(fits_.GUARDS) | frozenset(fits_.REGION_OPS)
# arith.cmpi predicates
_NE, _SLT, _SLE, _SGT = 1, 2, 3, 4


def guard_run_time_shapes(module: ir.Module) -> None:
    ops, fits, yields = [], [], []
    for op in walk(module.operation):
        if op.name in _SIZE_OPS or (op.name in _WHEN_DYNAMIC and _guard_needed(op)):
            ops.append(op)
        if op.name in fits_.GUARDS and fits_.needed(op):
            fits.append(op)
        if op.name in fits_.REGION_OPS:
            yields += [(op, *found) for found in fits_.mismatched_yields(op)]
    if not (ops or fits or yields):
        return   # all static: the module is left exactly as it was
    guards = _Guards(module)
    for op in ops:
        with ir.InsertionPoint(op), op.location:
            _GUARDS.get(op.name, _shape_agreement)(guards, op)
    for op in fits:
        with ir.InsertionPoint(op), op.location:
            fits_.GUARDS[op.name](guards, op)
    for op, terminator, types in yields:
        with ir.InsertionPoint(terminator), op.location:
            fits_.guard_yield(guards, op, terminator, types)


class _Guards:
    """Builds the scalar code of a guard before the op it protects (the insertion point)."""

    def __init__(self, module: ir.Module):
        self.module = module
        self.i64 = ir.IntegerType.get_signless(64)
        taken = {ir.StringAttr(o.operation.attributes["sym_name"]).value
                 for o in module.body.operations if "sym_name" in o.operation.attributes}
        self.taken = taken
        if FAILED_SYMBOL not in taken:
            with ir.InsertionPoint.at_block_begin(module.body), ir.Location.unknown():
                func.FuncOp(FAILED_SYMBOL, ir.FunctionType.get([self.i64, self.i64], []),
                            visibility="private")

    def const(self, value: int) -> ir.Value:
        return arith.ConstantOp(self.i64, value).result

    def scalars(self, value: ir.Value) -> list[ir.Value]:
        """The entries of a rank-0 or rank-1 integer (or index) tensor, as i64 scalars. An
        unsigned tensor is converted to i64 first: exact below 64 bits, and a ui64 above
        2^63 becomes negative, which every guard rejects as it must (it exceeds any size)."""
        ttype = ir.RankedTensorType(value.type)
        element = ttype.element_type
        if isinstance(element, ir.IntegerType) and not element.is_signless:
            wide = ir.RankedTensorType.get(ttype.shape, self.i64)
            value = ir.Operation.create("stablehlo.convert", results=[wide], operands=[value]).result
            element = self.i64
        count = ttype.shape[0] if ttype.rank == 1 else 1
        out = []
        for k in range(count):
            where = [arith.ConstantOp(ir.IndexType.get(), k).result] if ttype.rank == 1 else []
            x = tensor.ExtractOp(value, where).result
            if isinstance(element, ir.IndexType):
                x = arith.index_cast(self.i64, x)
            elif ir.IntegerType(element).width < 64:
                x = arith.extsi(self.i64, x)
            out.append(x)
        return out

    def dim(self, value: ir.Value, d: int) -> ir.Value:
        size = ir.RankedTensorType(value.type).shape[d]
        if not ir.ShapedType.is_dynamic_size(size):
            return self.const(size)
        index = arith.ConstantOp(ir.IndexType.get(), d).result
        return arith.index_cast(self.i64, tensor.DimOp(value, index).result)

    def cmp(self, predicate: int, a: ir.Value, b: ir.Value) -> ir.Value:
        return arith.cmpi(predicate, a, b)

    def any(self, conditions: list[ir.Value]) -> ir.Value:
        out = conditions[0]
        for c in conditions[1:]:
            out = arith.ori(out, c)
        return out

    def all(self, conditions: list[ir.Value]) -> ir.Value:
        out = conditions[0]
        for c in conditions[1:]:
            out = arith.andi(out, c)
        return out

    def static_size_differs(self, result: ir.Value, d: int, size: ir.Value) -> list[ir.Value]:
        static = ir.RankedTensorType(result.type).shape[d]
        if ir.ShapedType.is_dynamic_size(static):
            return []
        return [self.cmp(_NE, size, self.const(static))]

    def too_large(self, result: ir.Value, sizes: list[ir.Value]) -> list[ir.Value]:
        """Conditions that hold when a result of these (non-negative) sizes would take more
        than 2^62 bytes: the allocation's byte count would otherwise wrap in 64 bits (a
        dynamic_iota of 2^62 elements allocated 0 bytes and wrote past them). The product
        is bounded step by step, so it never overflows itself. KILN_MAX_BUFFER_BYTES is
        enforced below that by the runtime's allocator, so compiled code does not depend on
        the environment it was compiled in."""
        from .size_limits import RUN_TIME_BYTES, element_bytes
        rtype = ir.RankedTensorType(result.type)
        per_element = element_bytes(rtype.element_type) or 1
        static = 1
        for d in rtype.shape:
            if not ir.ShapedType.is_dynamic_size(d):
                static *= d
        dynamic = [n for d, n in zip(rtype.shape, sizes) if ir.ShapedType.is_dynamic_size(d)]
        if not dynamic or static == 0:
            return []
        most = self.const(RUN_TIME_BYTES // per_element // static)
        zero, one = self.const(0), self.const(1)
        bad, product = [], one
        for n in dynamic:
            divisor = arith.select(self.cmp(_SGT, n, zero), n, one)
            bad.append(self.cmp(_SGT, product, arith.divsi(most, divisor)))
            product = arith.muli(product, arith.select(bad[-1], one, n))
        # A size of 0 makes the result empty (0 bytes) whatever the others are: [2^62, 0]
        # is a valid, empty result (fuzz finding F5).
        nonempty = self.all([self.cmp(_NE, n, zero) for n in dynamic])
        return [arith.andi(self.any(bad), nonempty)]

    def fail_if(self, bad: list[ir.Value], op: ir.Operation, constraint: str,
                name: str | None = None) -> None:
        """Call the runtime's failure handler when any of `bad` holds; the message names
        `name`, else the op's own name (a lowered op names the StableHLO op it came from)."""
        if not bad:
            return
        # A program parsed from memory has no file name: "<string>", as compile errors say.
        where = format_location(op.location, "<string>")
        text = f"{name or op.name}\x1f{where}\x1f{constraint}".encode("utf-8", "replace")
        data = memref_global(self, text)
        branch = scf.IfOp(self.any(bad))
        with ir.InsertionPoint(branch.then_block):
            message = memref.get_global(data[1], data[0])
            address = arith.index_cast(self.i64, memref.extract_aligned_pointer_as_index(message))
            func.CallOp([], ir.FlatSymbolRefAttr.get(FAILED_SYMBOL),
                        [address, self.const(len(text))])
            scf.YieldOp([])


def memref_global(guards: _Guards, text: bytes) -> tuple[str, ir.MemRefType]:
    """A private constant global holding `text`, at the top of the module."""
    import numpy as np
    i8 = ir.IntegerType.get_signless(8)
    mtype = ir.MemRefType.get([len(text)], i8)
    name = next(f"{_GLOBAL_PREFIX}{n}" for n in range(len(guards.taken) + 1)
                if f"{_GLOBAL_PREFIX}{n}" not in guards.taken)
    guards.taken.add(name)
    values = ir.DenseElementsAttr.get(np.frombuffer(text, dtype=np.int8).copy(),
                                      type=ir.RankedTensorType.get([len(text)], i8))
    with ir.InsertionPoint.at_block_begin(guards.module.body), ir.Location.unknown():
        memref.GlobalOp(name, ir.TypeAttr.get(mtype), sym_visibility="private",
                        initial_value=values, constant=True)
    return name, mtype


def _real_dynamic_slice(g: _Guards, op: ir.Operation) -> None:
    operand, start, limit, strides = op.operands
    starts, limits, steps = g.scalars(start), g.scalars(limit), g.scalars(strides)
    zero, one = g.const(0), g.const(1)
    bounds, sizes = [], []
    for d, (s, e, t) in enumerate(zip(starts, limits, steps)):
        bounds += [g.cmp(_SLT, s, zero), g.cmp(_SGT, s, e), g.cmp(_SGT, e, g.dim(operand, d)),
                   g.cmp(_SLE, t, zero)]
        if not ir.ShapedType.is_dynamic_size(ir.RankedTensorType(op.results[0].type).shape[d]):
            # The size the lowering computes, with a stride of at least 1 so that this
            # division cannot trap before the branch is taken.
            safe = arith.select(g.cmp(_SGT, t, zero), t, one)
            sizes += g.static_size_differs(op.results[0], d,
                                           arith.ceildivsi(arith.subi(e, s), safe))
    g.fail_if(bounds, op, "start, limit or stride out of range: the spec requires "
                          "0 <= start_indices <= limit_indices <= shape(operand) and strides > 0")
    g.fail_if(sizes, op, "the result's static shape differs from "
                         "ceil((limit_indices - start_indices) / strides)")


_TOO_LARGE = "the result's byte count would not fit in 64 bits"


def _dynamic_iota(g: _Guards, op: ir.Operation) -> None:
    shape = g.scalars(op.operands[0])
    zero = g.const(0)
    g.fail_if([g.cmp(_SLT, n, zero) for n in shape], op, "a negative size in output_shape")
    g.fail_if(g.too_large(op.results[0], shape), op, _TOO_LARGE)
    g.fail_if([c for d, n in enumerate(shape) for c in g.static_size_differs(op.results[0], d, n)],
              op, "output_shape differs from the result's static shape")


def _dynamic_broadcast_in_dim(g: _Guards, op: ir.Operation) -> None:
    operand, shape_operand = op.operands[0], op.operands[1]
    shape = g.scalars(shape_operand)
    zero, one = g.const(0), g.const(1)
    g.fail_if([g.cmp(_SLT, n, zero) for n in shape], op, "a negative size in output_dimensions")
    g.fail_if(g.too_large(op.results[0], shape), op, _TOO_LARGE)
    g.fail_if([c for d, n in enumerate(shape) for c in g.static_size_differs(op.results[0], d, n)],
              op, "output_dimensions differs from the result's static shape")
    dims = list(ir.DenseI64ArrayAttr(op.attributes["broadcast_dimensions"]))
    mismatch = []
    for i, d in enumerate(dims):
        size = g.dim(operand, i)
        mismatch.append(arith.andi(g.cmp(_NE, size, one), g.cmp(_NE, size, shape[d])))
    g.fail_if(mismatch, op, "an operand dimension is neither 1 nor the output dimension it "
                            "is broadcast to")


def _set_dimension_size(g: _Guards, op: ir.Operation) -> None:
    operand, size = op.operands
    d = ir.IntegerAttr(op.attributes["dimension"]).value
    (n,) = g.scalars(size)
    g.fail_if([g.cmp(_SLT, n, g.const(0)), g.cmp(_SGT, n, g.dim(operand, d))], op,
              f"size out of range: it must be within [0, dim(operand, {d})]")


def _slice(g: _Guards, op: ir.Operation) -> None:
    operand = op.operands[0]
    limits = list(ir.DenseI64ArrayAttr(op.attributes["limit_indices"]))
    dynamic = [d for d, n in enumerate(ir.RankedTensorType(operand.type).shape)
               if ir.ShapedType.is_dynamic_size(n)]
    g.fail_if([g.cmp(_SGT, g.const(limits[d]), g.dim(operand, d)) for d in dynamic], op,
              "limit_indices past the operand's run-time size: the spec requires "
              "limit_indices <= shape(operand)")


_GUARDS = {
    "stablehlo.slice": _slice,
    "stablehlo.real_dynamic_slice": _real_dynamic_slice,
    "stablehlo.dynamic_iota": _dynamic_iota,
    "stablehlo.dynamic_broadcast_in_dim": _dynamic_broadcast_in_dim,
    "stablehlo.set_dimension_size": _set_dimension_size,
}


def _checked_members(group: list[agreement.Member]) -> list[agreement.Member]:
    """The members a guard can read before the op: not a result's dynamic size (computed by
    the lowering from the operands, so pinned down by the others)."""
    return [m for m in group if not (m[2].startswith("result") and agreement.is_dynamic(m))]


def _guard_needed(op: ir.Operation) -> bool:
    if not agreement.has_dynamic_operand(op):
        return False   # the common case, decided without building the groups
    if op.name == "stablehlo.slice":
        return True
    groups = agreement.equal_groups(op)
    if any(len(_checked_members(g)) > 1 and any(map(agreement.is_dynamic, _checked_members(g)))
           for g in groups):
        return True
    axis = agreement.concatenated_sizes(op)
    return (bool(axis) and not agreement.is_dynamic(axis[1])
            and any(map(agreement.is_dynamic, axis[0])))


def _shape_agreement(g: _Guards, op: ir.Operation) -> None:
    for group in agreement.equal_groups(op):
        members = _checked_members(group)
        if len(members) < 2 or not any(map(agreement.is_dynamic, members)):
            continue
        # Compare with a static size where there is one: a constant, folded into the compare.
        reference = next((m for m in members if not agreement.is_dynamic(m)), members[0])
        size = g.dim(reference[0], reference[1])
        # Static members agree with each other already (the verifier checks compatible shapes).
        bad = [g.cmp(_NE, g.dim(v, d), size) for v, d, n in members
               if agreement.is_dynamic((v, d, n)) and (v, d, n) != reference]
        g.fail_if(bad, op, f"run-time sizes disagree: {agreement.describe(members)} must be equal")
    axis = agreement.concatenated_sizes(op)
    if axis and not agreement.is_dynamic(axis[1]) and any(map(agreement.is_dynamic, axis[0])):
        total = g.dim(*axis[0][0][:2])
        for v, d, _ in axis[0][1:]:
            total = arith.addi(total, g.dim(v, d))
        g.fail_if(g.static_size_differs(axis[1][0], axis[1][1], total), op,
                  f"run-time sizes disagree: dimension {axis[1][1]} of the operands must add up "
                  f"to the result's {ir.RankedTensorType(axis[1][0].type).shape[axis[1][1]]}")
