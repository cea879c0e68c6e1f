"""Lowerings: semantics (see passes/legalize/__init__.py).

Ops upstream `stablehlo-legalize-to-linalg` lowers with a meaning other than StableHLO's (as
the reference interpreter and XLA define it). Each is rewritten, before upstream runs, into
StableHLO whose upstream lowering is right:

* `add` on i1 is logical OR (upstream emits `arith.addi`, i.e. XOR): becomes `or`.
* `convert` float -> integer saturates as XLA's elemental emitter does: NaN -> 0,
  x <= MIN -> MIN, x >= MAX (as a float) -> MAX, unsigned x <= 0 -> 0 (upstream's bare
  `fptosi`/`fptoui` gives poison, in practice INT_MIN, and wraps narrow types). Complex
  sources convert their real part.
* `cbrt` on complex (upstream has none) is the reference's principal root:
  |z|^(1/3) * (cos(t), sin(t)) with t = atan2(im, re) / 3; |z| via `abs` (no overflow in
  re^2 + im^2) and the real `cbrt`.
* `maximum` / `minimum` on complex compare lexicographically (real part, then imaginary),
  returning the left operand only when it is strictly greater (smaller); upstream has no
  complex ordering.

* `dot_general` and `convolution` with an unsigned operand narrower than an integer result:
  upstream drops the signedness and sign-extends it (a ui8 255 becomes -1); the operand is
  first converted to a signed integer twice as wide.

* `reduce` over no dimensions (JAX emits it for `reduce_max(x, ())`, e.g. under
  `disable_jit`) combines each element once with the initial value; upstream has no lowering
  for it. Each input gains a trailing dimension of size 1, which the reduce then runs over.
  (A `reduce` of inputs with no elements is kiln-fold-empty-values' work: empty_reductions.py.)

* `log_plus_one` on complex is written with real log1p (XLA's formulation):
  re = log1p(M - 1) + log1p((m / M)^2) / 2 with M, m the larger and smaller of |a + 1| and |b|
  (M - 1 taken as a itself when a + 1 > |b|), im = atan2(b, a + 1); a NaN real part (infinite
  or NaN input) becomes m. Upstream's complex log1p is log(1 + z), inaccurate near 0.

After upstream: `math.log1p` and `math.expm1` become calls of libm's log1p/expm1
(f16/bf16 through f32). The LLVM lowering would otherwise compute log(1 + x) and exp(x) - 1,
which lose every digit for small x (and in bf16 arithmetic, nearly all of them).

Integer division and remainder by zero / of INT_MIN by -1, shifts by at least the bit width,
clz/popcnt, float -> bool and int -> bool conversions already follow XLA upstream (checked by
tests/py/test_semantics.py).
"""
from __future__ import annotations

import numpy as np
from torch_mlir import ir

from ..ir_util import walk
from .hlo_builder import comparison_direction


def _element(value: ir.Value) -> ir.Type:
    return ir.RankedTensorType(value.type).element_type


def _tensor_like(value: ir.Value, element: ir.Type) -> ir.Type:
    t = ir.RankedTensorType(value.type)
    return ir.RankedTensorType.get(t.shape, element)


def _create(name: str, result: ir.Type, operands: list[ir.Value], **attrs) -> ir.Value:
    return ir.Operation.create(name, results=[result], operands=operands, attributes=attrs).result


def _splat(like: ir.Value, element: ir.Type, value) -> ir.Value:
    t = _tensor_like(like, element)
    if isinstance(element, ir.IntegerType):
        value = int(value)
        if value >= 1 << 63:  # the bindings take int64: pass the same bits
            value -= 1 << 64
        attr = ir.IntegerAttr.get(element, value)
    else:
        attr = ir.FloatAttr.get(element, float(value))
    return _create("stablehlo.constant", t, [], value=ir.DenseElementsAttr.get_splat(t, attr))


def _compare(direction: str, a: ir.Value, b: ir.Value) -> ir.Value:
    i1 = ir.IntegerType.get_signless(1)
    return _create("stablehlo.compare", _tensor_like(a, i1), [a, b],
                   comparison_direction=comparison_direction(direction))


def _select(pred: ir.Value, a: ir.Value, b: ir.Value) -> ir.Value:
    return _create("stablehlo.select", a.type, [pred, a, b])


def _is_i1(t: ir.Type) -> bool:
    return isinstance(t, ir.IntegerType) and ir.IntegerType(t).width == 1


def _lower_bool_add(op: ir.Operation) -> None:
    with ir.InsertionPoint(op), op.location:
        new = _create("stablehlo.or", op.results[0].type, list(op.operands))
    op.results[0].replace_all_uses_with(new)
    op.erase()


def _float_bound(value: int, element: ir.Type) -> float:
    """`value` as the nearest float of `element`'s precision (XLA's ConstantFP::get)."""
    return float(np.float32(value)) if str(element) == "f32" else float(value)


def _lower_float_to_int(op: ir.Operation) -> None:
    source = op.operands[0]
    target = ir.IntegerType(_element(op.results[0]))
    with ir.InsertionPoint(op), op.location:
        x = source
        if isinstance(_element(x), ir.ComplexType):
            x = _create("stablehlo.real", _tensor_like(x, ir.ComplexType(_element(x)).element_type), [x])
        # Compare in f32 (or f64): exact for every narrower float, and the bounds below round
        # exactly as they would in the narrow type (beyond its range they match only ±inf).
        if ir.FloatType(_element(x)).width < 32 or str(_element(x)) not in ("f32", "f64"):
            x = _create("stablehlo.convert", _tensor_like(x, ir.F32Type.get()), [x])
        ftype = _element(x)
        width = target.width
        converted = _create("stablehlo.convert", op.results[0].type, [x])
        if target.is_unsigned:
            lo, hi = 0, (1 << width) - 1
            # (x <= 0 || isnan(x)) ? 0 : x >= UINT_MAX ? UINT_MAX : fptoui(x)
            out = _select(_compare("GE", x, _splat(x, ftype, _float_bound(hi, ftype))),
                          _splat(op.results[0], target, hi), converted)
            not_positive = _compare("LE", x, _splat(x, ftype, 0.0))
            out = _select(not_positive, _splat(op.results[0], target, lo), out)
            out = _select(_compare("NE", x, x), _splat(op.results[0], target, 0), out)
        else:
            lo, hi = -(1 << (width - 1)), (1 << (width - 1)) - 1
            out = _select(_compare("LE", x, _splat(x, ftype, _float_bound(lo, ftype))),
                          _splat(op.results[0], target, lo), converted)
            out = _select(_compare("GE", x, _splat(x, ftype, _float_bound(hi, ftype))),
                          _splat(op.results[0], target, hi), out)
            out = _select(_compare("NE", x, x), _splat(op.results[0], target, 0), out)
    op.results[0].replace_all_uses_with(out)
    op.erase()


def _lower_complex_extremum(op: ir.Operation) -> None:
    a, b = op.operands
    greater = "GT" if op.name == "stablehlo.maximum" else "LT"
    with ir.InsertionPoint(op), op.location:
        part = _tensor_like(a, ir.ComplexType(_element(a)).element_type)
        ra, rb = (_create("stablehlo.real", part, [v]) for v in (a, b))
        ia, ib = (_create("stablehlo.imag", part, [v]) for v in (a, b))
        pick_a = _select(_compare("EQ", ra, rb), _compare(greater, ia, ib), _compare(greater, ra, rb))
        out = _select(pick_a, a, b)
    op.results[0].replace_all_uses_with(out)
    op.erase()


def _lower_complex_cbrt(op: ir.Operation) -> None:
    z = op.operands[0]
    with ir.InsertionPoint(op), op.location:
        part = _tensor_like(z, ir.ComplexType(_element(z)).element_type)
        re = _create("stablehlo.real", part, [z])
        im = _create("stablehlo.imag", part, [z])
        radius = _create("stablehlo.cbrt", part, [_create("stablehlo.abs", part, [z])])
        angle = _create("stablehlo.divide", part, [_create("stablehlo.atan2", part, [im, re]),
                                                   _splat(re, ir.RankedTensorType(part).element_type, 3.0)])
        out = _create("stablehlo.complex", z.type, [
            _create("stablehlo.multiply", part, [radius, _create("stablehlo.cosine", part, [angle])]),
            _create("stablehlo.multiply", part, [radius, _create("stablehlo.sine", part, [angle])])])
    op.results[0].replace_all_uses_with(out)
    op.erase()


def _lower_complex_log1p(op: ir.Operation) -> None:
    z = op.operands[0]
    with ir.InsertionPoint(op), op.location:
        part = _tensor_like(z, ir.ComplexType(_element(z)).element_type)
        ftype = ir.RankedTensorType(part).element_type

        def f(name, *args):
            return _create(f"stablehlo.{name}", part, list(args))

        a, b = f("real", z), f("imag", z)
        one = _splat(a, ftype, 1.0)
        a1 = f("add", a, one)
        abs_a1, abs_b = f("abs", a1), f("abs", b)
        big, small = f("maximum", abs_a1, abs_b), f("minimum", abs_a1, abs_b)
        big_minus_one = _select(_compare("GT", a1, abs_b), a, f("subtract", big, one))
        ratio = f("divide", small, big)
        half = _splat(a, ftype, 0.5)
        re = f("add", f("log_plus_one", big_minus_one),
               f("multiply", half, f("log_plus_one", f("multiply", ratio, ratio))))
        re = _select(_compare("NE", re, re), small, re)
        out = _create("stablehlo.complex", z.type, [re, f("atan2", b, a1)])
    op.results[0].replace_all_uses_with(out)
    op.erase()


_HALF_FLOATS = ("f16", "bf16")


def _widen_half_dot(op: ir.Operation) -> None:
    """XLA:CPU multiplies f16/bf16 matrices with f32 accumulation and rounds once at the end;
    accumulating in the narrow type loses several bits on long contractions."""
    f32 = ir.F32Type.get()
    with ir.InsertionPoint(op), op.location:
        operands = [_create("stablehlo.convert", _tensor_like(v, f32), [v])
                    if str(_element(v)) in _HALF_FLOATS else v for v in op.operands]
        attrs = {named.name: named.attr for named in (op.attributes[i] for i in range(len(op.attributes)))}
        wide = ir.Operation.create(op.name, results=[_tensor_like(op.results[0], f32)],
                                   operands=operands, attributes=attrs).result
        narrow = _create("stablehlo.convert", op.results[0].type, [wide])
    op.results[0].replace_all_uses_with(narrow)
    op.erase()


def _unsigned_operands_widened(op: ir.Operation) -> list[int]:
    """Operands of a dot_general or convolution that are unsigned and narrower than its
    integer result: upstream drops the signedness and sign-extends them."""
    out = _element(op.results[0])
    if not isinstance(out, ir.IntegerType):
        return []
    return [i for i, v in enumerate(op.operands) if isinstance(_element(v), ir.IntegerType)
            and ir.IntegerType(_element(v)).is_unsigned
            and ir.IntegerType(_element(v)).width < ir.IntegerType(out).width]


def _widen_unsigned_operands(op: ir.Operation, indices: list[int]) -> None:
    """Each such operand converted (exactly) to a signed integer of twice its width, which
    the result's width holds, so that upstream's sign extension is right."""
    with ir.InsertionPoint(op), op.location:
        for i in indices:
            v = op.operands[i]
            wide = ir.IntegerType.get_signless(2 * ir.IntegerType(_element(v)).width)
            op.operands[i] = _create("stablehlo.convert", _tensor_like(v, wide), [v])


def _reduces_no_dimension(op: ir.Operation) -> bool:
    if len(ir.DenseI64ArrayAttr(op.attributes["dimensions"])) != 0:
        return False
    inputs = list(op.operands)[:len(op.operands) // 2]
    return all(ir.RankedTensorType(v.type).has_static_shape for v in inputs)


def _reduce_over_unit_dimension(op: ir.Operation) -> None:
    """reduce(x, init) over no dimensions as reduce(x[..., None], init) over the new one."""
    count = len(op.operands) // 2  # inputs, then as many initial values
    rank = ir.RankedTensorType(op.operands[0].type).rank
    with ir.InsertionPoint(op), op.location:
        for i in range(count):
            value = op.operands[i]
            shape = list(ir.RankedTensorType(value.type).shape) + [1]
            op.operands[i] = _create(
                "stablehlo.broadcast_in_dim",
                ir.RankedTensorType.get(shape, _element(value)), [value],
                broadcast_dimensions=ir.DenseI64ArrayAttr.get(list(range(rank))))
    op.attributes["dimensions"] = ir.DenseI64ArrayAttr.get([rank])


def _needs_int_saturation(op: ir.Operation) -> bool:
    src, dst = _element(op.operands[0]), _element(op.results[0])
    if isinstance(src, ir.ComplexType):
        src = ir.ComplexType(src).element_type
    return isinstance(src, ir.FloatType) and isinstance(dst, ir.IntegerType) and not _is_i1(dst)


def _single_replica_id(op: ir.Operation) -> None:
    """A program Kiln runs is one replica of one partition: both ids are 0."""
    t = op.results[0].type
    with ir.InsertionPoint(op), op.location:
        zero = ir.Operation.create("stablehlo.constant", results=[t], attributes={
            "value": ir.DenseElementsAttr.get_splat(t, ir.IntegerAttr.get(
                ir.RankedTensorType(t).element_type, 0))}).result
    op.results[0].replace_all_uses_with(zero)
    op.erase()


def fix_semantics(module: ir.Module) -> None:
    for op in list(walk(module.operation)):
        if op.name == "interpreter.run_parallel":
            from ...errors import KilnError
            raise KilnError("interpreter.run_parallel launches programs as separate processes "
                            "(replicas/partitions, infeed/outfeed queues); Kiln runs one program",
                            location=str(op.location),
                            hint="multi-process execution (collectives, infeed/outfeed) is not "
                                 "supported yet")
        if op.name in ("stablehlo.replica_id", "stablehlo.partition_id"):
            _single_replica_id(op)
        elif op.name == "stablehlo.dot_general" and "algorithm" in op.attributes:
            # A lower bound on precision: the CPU computes in the operand type or wider,
            # which meets it; upstream's lowering does not accept the attribute.
            del op.attributes["algorithm"]
        elif op.name in ("stablehlo.dot_general", "stablehlo.convolution") and \
                _unsigned_operands_widened(op):
            _widen_unsigned_operands(op, _unsigned_operands_widened(op))
        elif op.name == "stablehlo.reduce" and _reduces_no_dimension(op):
            _reduce_over_unit_dimension(op)
        elif op.name == "stablehlo.add" and _is_i1(_element(op.results[0])):
            _lower_bool_add(op)
        elif op.name == "stablehlo.convert" and _needs_int_saturation(op):
            _lower_float_to_int(op)
        elif op.name in ("stablehlo.maximum", "stablehlo.minimum") and \
                isinstance(_element(op.results[0]), ir.ComplexType):
            _lower_complex_extremum(op)
        elif op.name == "stablehlo.cbrt" and isinstance(_element(op.results[0]), ir.ComplexType):
            _lower_complex_cbrt(op)
        elif op.name == "stablehlo.log_plus_one" and isinstance(_element(op.results[0]), ir.ComplexType):
            _lower_complex_log1p(op)
        elif op.name in ("stablehlo.dot_general", "stablehlo.convolution") and \
                str(_element(op.results[0])) in _HALF_FLOATS:
            _widen_half_dot(op)


_LIBM = {"math.log1p": "log1p", "math.expm1": "expm1"}


def _libm_declaration(module: ir.Module, name: str, ftype: ir.Type) -> str:
    symbol = name + ("f" if str(ftype) == "f32" else "")
    table = {ir.StringAttr(op.attributes["sym_name"]).value for op in module.body.operations
             if "sym_name" in op.operation.attributes}
    if symbol not in table:
        with ir.InsertionPoint(module.body), ir.Location.unknown():
            ir.Operation.create("func.func", attributes={
                "sym_name": ir.StringAttr.get(symbol),
                "function_type": ir.TypeAttr.get(ir.FunctionType.get([ftype], [ftype])),
                "sym_visibility": ir.StringAttr.get("private")}, regions=1)
    return symbol


def accurate_libm_calls(module: ir.Module) -> None:
    for op in list(walk(module.operation)):
        if op.name not in _LIBM:
            continue
        t = op.results[0].type
        if str(t) not in ("f16", "bf16", "f32", "f64"):
            continue  # vectors do not reach here; leave anything else to the default lowering
        wide = ir.F64Type.get() if str(t) == "f64" else ir.F32Type.get()
        symbol = _libm_declaration(module, _LIBM[op.name], wide)
        with ir.InsertionPoint(op), op.location:
            x = op.operands[0]
            if t != wide:
                x = _create("arith.extf", wide, [x])
            y = ir.Operation.create("func.call", results=[wide], operands=[x], attributes={
                "callee": ir.FlatSymbolRefAttr.get(symbol)}).result
            if t != wide:
                y = _create("arith.truncf", t, [y])
        op.results[0].replace_all_uses_with(y)
        op.erase()
