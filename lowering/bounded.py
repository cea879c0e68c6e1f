"""kiln-pad-bounded-dims: bounded dynamic dimensions (`tensor<?xf32, #stablehlo.bounds<8>>`,
HLO's `f32[<=8]`) computed at their bound, as XLA does.

Entry arguments with bounded dimensions are specialised to the call's shapes like any
dynamic signature (lowering/shapes.py), so what is left here are the sizes a program sets
itself with `set_dimension_size` (XLA's dynamic padder does the same work). A value of
bounded type becomes a static tensor at its bound plus, per dynamic dimension, a size
(a tensor<i32> computed at run time). Ops see the padded data; those whose result would
depend on the padding get it masked first:

- elementwise ops, broadcast_in_dim and transpose carry the sizes along;
- reduce masks the padding of its reduced dimensions with its init value (the reducer's
  identity), dot_general that of its contracting dimensions with zeros;
- get_dimension_size reads the size;
- an entry result whose sizes are constants is sliced to them (its exact shape); one whose
  size is only known at run time is returned at its bound, with zeros past the size
  (get_dimension_size of it says how much is data).

Any other op on a bounded dimension is refused with a located error, never guessed at.
"""
from __future__ import annotations

import re

import numpy as np
from torch_mlir import ir

from ..errors import KilnError
from .ir_util import body_block, find_entry, walk
from .legalize.hlo_builder import HloBuilder, shape

_ELEMENTWISE = {f"stablehlo.{n}" for n in (
    "abs add and atan2 cbrt ceil clamp compare complex convert cosine count_leading_zeros "
    "divide exponential exponential_minus_one floor imag is_finite log log_plus_one logistic "
    "maximum minimum multiply negate not or popcnt power real remainder round_nearest_afz "
    "round_nearest_even rsqrt select shift_left shift_right_arithmetic shift_right_logical "
    "sign sine sqrt subtract tan tanh xor bitcast_convert reduce_precision").split()}

_BOUNDS = re.compile(r"#stablehlo\.bounds<([^>]*)>")


def bounds_of(t: ir.Type) -> list[int | None] | None:
    """Per dimension the bound of a bounded dynamic type (None where static or unbounded);
    None for a type with no bounded dimension."""
    try:
        ranked = ir.RankedTensorType(t)
    except ValueError:
        return None
    m = _BOUNDS.fullmatch(str(ranked.encoding)) if ranked.encoding is not None else None
    if m is None:
        return None
    parts = [p.strip() for p in m.group(1).split(",")]
    out = [None if p == "?" else int(p) for p in parts]
    return out if any(b is not None for b in out) else None


def _static_at_bound(t: ir.Type) -> ir.Type:
    ranked = ir.RankedTensorType(t)
    bounds = bounds_of(t) or [None] * ranked.rank
    dims = [b if ir.ShapedType.is_dynamic_size(d) and b is not None else d
            for d, b in zip(ranked.shape, bounds)]
    return ir.RankedTensorType.get(dims, ranked.element_type)


def _fail(op, message: str, hint: str | None = None):
    raise KilnError(f"{op.name}: {message}", location=str(op.location), hint=hint)


def _constant_size(v: ir.Value) -> int | None:
    owner = v.owner
    op = owner if isinstance(owner, ir.Operation) else getattr(owner, "operation", None)
    if op is None or op.name != "stablehlo.constant":
        return None
    return int(np.array(ir.DenseElementsAttr(op.attributes["value"])).reshape(-1)[0])


class _Padder:
    def __init__(self, func: ir.Operation):
        self.func = func
        self.sizes: dict = {}   # value -> [size value (tensor<i32>) or None per dimension]
        self.h = HloBuilder()

    def sizes_of(self, v: ir.Value) -> list | None:
        s = self.sizes.get(v)
        return s if s is not None and any(x is not None for x in s) else None

    # -- helpers, built before `op`
    def i32_size(self, v: ir.Value, bound: int) -> ir.Value:
        """The requested size as tensor<i32>, clamped to [0, bound] (a size past the bound has
        no data behind it)."""
        h = self.h
        v = h.convert(v, "i32")
        return h.op("stablehlo.clamp", [h.constant(np.int32(0), "i32"), v,
                                        h.constant(np.int32(bound), "i32")], [], "i32")

    def mask(self, x: ir.Value, sizes: list, dims, fill: ir.Value) -> ir.Value:
        """`x` with the padding past `sizes` along `dims` replaced by the scalar `fill`."""
        h = self.h
        keep = None
        for d in dims:
            if sizes[d] is None:
                continue
            index = h.iota(shape(x), d, "i32")
            limit = h.broadcast(sizes[d], shape(x), [])
            inside = h.compare("LT", index, limit, "SIGNED")
            keep = inside if keep is None else h.binary("and", keep, inside)
        if keep is None:
            return x
        return h.select(keep, x, h.broadcast(fill, shape(x), []))

    def zero(self, v: ir.Value) -> ir.Value:
        element = ir.RankedTensorType(v.type).element_type
        return self.h.op("stablehlo.constant", [], [], element,
                         value=ir.DenseElementsAttr.get_splat(
                             ir.RankedTensorType.get([], element), _zero_attr(element)))

    # -- the walk
    def run(self) -> bool:
        changed = False
        for op in list(body_block(self.func).operations):
            with ir.InsertionPoint(op), op.location:
                changed |= self.visit(op)
        return changed

    def visit(self, op: ir.Operation) -> bool:
        name = op.name
        if name == "stablehlo.set_dimension_size":
            self.set_size(op)
            return True
        operand_sizes = [self.sizes_of(v) for v in op.operands]
        bounded_results = any(bounds_of(r.type) for r in op.results)
        if name == "stablehlo.get_dimension_size":
            return self.get_size(op, operand_sizes[0])
        if name == "func.return":
            return self.returned(op, operand_sizes)
        if op.regions and any(self.sizes_of(v) for inner in walk(op) for v in inner.operands):
            _fail(op, "a region that uses a value of bounded dynamic size is not supported yet",
                  hint="its padding would be read as data")
        if not any(operand_sizes) and not bounded_results:
            return False
        for region in op.regions:
            for block in region.blocks:
                for inner in block.operations:
                    if any(bounds_of(r.type) for r in inner.results):
                        _fail(op, "bounded dynamic dimensions inside its regions are not "
                                  "supported yet")
        if name in _ELEMENTWISE:
            merged = None
            for s in operand_sizes:
                if s is not None:
                    merged = [a if a is not None else b for a, b in zip(merged or s, s)]
            self.finish(op, [merged])
        elif name == "stablehlo.broadcast_in_dim":
            dims = list(ir.DenseI64ArrayAttr(op.attributes["broadcast_dimensions"]))
            out = [None] * ir.RankedTensorType(op.results[0].type).rank
            for i, d in enumerate(dims):
                out[d] = (operand_sizes[0] or [None] * len(dims))[i]
            self.finish(op, [out])
        elif name == "stablehlo.transpose":
            perm = list(ir.DenseI64ArrayAttr(op.attributes["permutation"]))
            s = operand_sizes[0] or [None] * len(perm)
            self.finish(op, [[s[p] for p in perm]])
        elif name == "stablehlo.reduce":
            self.reduce(op, operand_sizes)
        elif name == "stablehlo.dot_general":
            self.dot(op, operand_sizes)
        else:
            _fail(op, "this op on a bounded dynamic dimension (f32[<=N]) is not supported yet",
                  hint="supported: elementwise ops, broadcast_in_dim, transpose, reduce, "
                       "dot_general, get_dimension_size and set_dimension_size")
        return True

    def finish(self, op: ir.Operation, result_sizes: list) -> None:
        for r, s in zip(op.results, result_sizes):
            if bounds_of(r.type):
                r.set_type(_static_at_bound(r.type))
            if s is not None and any(x is not None for x in s):
                self.sizes[r] = s

    def set_size(self, op: ir.Operation) -> None:
        x, size = op.operands
        d = ir.IntegerAttr(op.attributes["dimension"]).value
        bound = shape(x)[d] if not ir.ShapedType.is_dynamic_size(shape(x)[d]) else None
        if bound is None:
            _fail(op, "the operand's dimension must have a static size or a bound")
        sizes = list(self.sizes.get(x) or [None] * len(shape(x)))
        constant = _constant_size(size)
        sizes[d] = (self.h.constant(np.int32(min(max(constant, 0), bound)), "i32")
                    if constant is not None else self.i32_size(size, bound))
        # A value of its own (an identity reshape): `x` itself keeps its full size for its
        # other users.
        padded = ir.Operation.create("stablehlo.reshape", results=[x.type], operands=[x]).result
        self.sizes[padded] = sizes
        op.results[0].replace_all_uses_with(padded)
        op.erase()

    def get_size(self, op: ir.Operation, sizes) -> bool:
        d = ir.IntegerAttr(op.attributes["dimension"]).value
        if sizes is None or sizes[d] is None:
            return False  # a static dimension: canonicalize folds it
        out = self.h.convert(sizes[d], ir.RankedTensorType(op.results[0].type).element_type)
        op.results[0].replace_all_uses_with(out)
        op.erase()
        return True

    def reduce(self, op: ir.Operation, operand_sizes) -> None:
        n = len(op.operands) // 2
        dims = list(ir.DenseI64ArrayAttr(op.attributes["dimensions"]))
        for i in range(n):
            s = operand_sizes[i]
            if s is not None:
                op.operands[i] = self.mask(op.operands[i], s, dims, op.operands[n + i])
        kept = None
        for s in operand_sizes[:n]:
            if s is not None:
                kept = [x for d, x in enumerate(s) if d not in dims]
        self.finish(op, [kept] * len(op.results))

    def dot(self, op: ir.Operation, operand_sizes) -> None:
        text = str(op.attributes["dot_dimension_numbers"])

        def field(key):
            m = re.search(key + r" = \[([\d, ]*)\]", text)
            return [int(v) for v in m.group(1).split(",") if v.strip()] if m else []
        lhs_batch, rhs_batch = field("lhs_batching_dimensions"), field("rhs_batching_dimensions")
        lhs_con, rhs_con = field("lhs_contracting_dimensions"), field("rhs_contracting_dimensions")
        lhs, rhs = operand_sizes
        rank_l, rank_r = len(shape(op.operands[0])), len(shape(op.operands[1]))
        lhs = lhs or [None] * rank_l
        rhs = rhs or [None] * rank_r
        for i, (s, con) in enumerate(((lhs, lhs_con), (rhs, rhs_con))):
            if any(s[d] is not None for d in con):
                op.operands[i] = self.mask(op.operands[i], s, con, self.zero(op.operands[i]))
        out = ([lhs[d] for d in lhs_batch]
               + [lhs[d] for d in range(rank_l) if d not in lhs_batch + lhs_con]
               + [rhs[d] for d in range(rank_r) if d not in rhs_batch + rhs_con])
        self.finish(op, [out])

    def returned(self, op: ir.Operation, operand_sizes) -> bool:
        if not any(operand_sizes):
            return False
        h = self.h
        for i, s in enumerate(operand_sizes):
            if s is None:
                continue
            v = op.operands[i]
            constant = [_constant_size(x) if x is not None else None for x in s]
            if all(c is not None for c, x in zip(constant, s) if x is not None):
                limit = [c if c is not None else n for c, n in zip(constant, shape(v))]
                op.operands[i] = h.slice(v, [0] * len(limit), limit)  # the exact shape
            else:
                op.operands[i] = self.mask(v, s, range(len(s)), self.zero(v))
        function_type = ir.FunctionType(ir.TypeAttr(self.func.attributes["function_type"]).value)
        self.func.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(
            function_type.inputs, [v.type for v in op.operands]))
        return True


def _zero_attr(element: ir.Type) -> ir.Attribute:
    try:
        return ir.IntegerAttr.get(ir.IntegerType(element), 0)
    except ValueError:
        pass
    try:
        return ir.FloatAttr.get(element, 0.0)
    except (ValueError, TypeError):
        raise KilnError(f"bounded dynamic dimensions of {element} values are not supported "
                        "yet") from None


def pad_bounded_dims(module: ir.Module, entry: str | None = None) -> None:
    """Entry-function rewrite; a no-op for programs without bounded dynamic types."""
    if not any(bounds_of(r.type) for f in module.body.operations for op in walk(f.operation)
               for r in op.results):
        return
    func = find_entry(module, entry)
    for f in module.body.operations:
        if f.operation != func.operation and any(
                bounds_of(r.type) for op in walk(f.operation) for r in op.results):
            raise KilnError("bounded dynamic dimensions outside the entry function (after "
                            "inlining) are not supported yet", location=str(f.location))
    _Padder(func).run()


def drop_argument_bounds(func: ir.Operation) -> None:
    """The entry's bounded arguments as plain dynamic ones, before the entry is specialised
    to its call's shapes (shapes.py): StableHLO's argument refinement does not refine a
    bounded type. The bounds stay in the caller's copy of the signature; a result that is
    an argument itself loses them with it, so the return still matches the signature."""
    block = body_block(func)
    function_type = ir.FunctionType(ir.TypeAttr(func.attributes["function_type"]).value)
    inputs = list(function_type.inputs)
    changed = False
    for i, arg in enumerate(block.arguments):
        if bounds_of(arg.type):
            ranked = ir.RankedTensorType(arg.type)
            arg.set_type(ir.RankedTensorType.get(list(ranked.shape), ranked.element_type,
                                                 loc=func.location))
            inputs[i] = arg.type
            changed = True
    if not changed:
        return
    results = list(function_type.results)
    for op in block.operations:
        if op.name == "func.return":
            for i, v in enumerate(op.operands):
                if isinstance(v, ir.BlockArgument) and v.owner == block and v.type != results[i]:
                    results[i] = v.type
    func.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(inputs, results))
